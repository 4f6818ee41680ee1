<?php

declare(strict_types=1);

namespace Delayer;

/**
 * The getters every job object has (mix/delayer-client's Message had them),
 * written once for {@see Message} and {@see ReservedMessage}: a class using
 * it has the properties $id, $topic, $body and $traceparent.
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

    /** The producer's W3C trace context given at push, or null ({@see Traceparent}). */
    public function getTraceparent(): ?string
    {
        return $this->traceparent;
    }
}
