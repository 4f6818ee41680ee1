<?php

declare(strict_types=1);

namespace Delayer;

/** mix/delayer-client's getters, once for {@see Message} and {@see ReservedMessage}. */
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
