<?php

declare(strict_types=1);

namespace Delayer;

/**
 * The getters every job object has (mix/delayer-client's Message had them),
 * written once for {@see Message} and {@see ReservedMessage}: a class using
 * it has the properties $id, $topic and $body.
 */
trait JobAccessors
{
    /** The job id. */
    public function getId(): string
    {
        return $this->id;
    }

    /** The topic. */
    public function getTopic(): string
    {
        return $this->topic;
    }

    /** The body (raw bytes). */
    public function getBody(): string
    {
        return $this->body;
    }
}
