<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\InvalidArgumentException;

/**
 * One job: an id (unique across all topics in the classic layout), a topic and
 * a binary-safe body. Built as mix/delayer-client's, from an array (missing keys
 * stay "", numbers become strings, other keys become properties, not pushed), or with {@see create()}:
 *
 *     $message = Message::create('mail:1', 'mail', $body)
 *         ->withMaxAttempts(5)                    // then dead letters; 0 = no limit
 *         ->withBackoff(Backoff::exponential(10, 600))
 *         ->withTraceparent($tp);                 // {@see Traceparent}
 *
 * The retry settings (also array keys) are read by reserve only; unset, the
 * bucket is exactly 1.x's and reserve uses 25 attempts, backoff 1 s to 1 h.
 */
#[\AllowDynamicProperties]
class Message
{
    use JobAccessors;

    public string $id = '';

    public string $topic = '';

    /** Any bytes, may be empty. */
    public string $body = '';

    /** Reservations allowed before dead letters (0: no limit); null: not sent. */
    public ?int $maxAttempts = null;

    /** The wait before a retry; null: not sent. */
    public ?Backoff $backoff = null;

    /** The producer's W3C trace context, handed back to the consumer. */
    public ?string $traceparent = null;

    /**
     * @param array<string, mixed> $config id, topic, body, maxAttempts, backoff, traceparent, and any of yours
     * @throws InvalidArgumentException on a value of the wrong type, or a maxAttempts out of range
     */
    public function __construct(array $config = [])
    {
        foreach ($config as $name => $value) {
            $kind = ['maxAttempts' => 'an int', 'traceparent' => 'a string', 'backoff' => 'a Delayer\Backoff'][$name] ?? null;
            if ($kind !== null) {
                $this->$name = match (true) {
                    $value === null => null,
                    $name === 'maxAttempts' && \is_int($value) => Validator::maxAttempts($value),
                    $name === 'traceparent' && \is_string($value) => Traceparent::check($value),
                    $name === 'backoff' && $value instanceof Backoff => $value,
                    default => throw new InvalidArgumentException("Message {$name} must be {$kind} or null, got " . get_debug_type($value)),
                };
                continue;
            }
            if ($name !== 'id' && $name !== 'topic' && $name !== 'body') {
                if (!\is_string($name) || $name === '') {
                    throw new InvalidArgumentException(sprintf('Message key %s is not a property name', var_export($name, true)));
                }
                $this->$name = $value; // 1.x kept every key as a property
                continue;
            }
            $value ??= ''; // 1.x left it null; validate() and push() refuse it alike
            if (\is_int($value) || \is_float($value) || $value instanceof \Stringable) {
                $value = (string) $value;
            }
            if (!\is_string($value)) {
                throw new InvalidArgumentException(sprintf('Message %s must be a string, got %s', $name, get_debug_type($value)));
            }
            $this->$name = $value;
        }
    }

    /** Builds a message from its three parts. */
    public static function create(string $id, string $topic, string $body = ''): self
    {
        return new self(['id' => $id, 'topic' => $topic, 'body' => $body]);
    }

    /**
     * A copy with max_attempts (reservations before dead letters) set; 0: no limit, null: unset.
     *
     * @throws InvalidArgumentException when out of range
     */
    public function withMaxAttempts(?int $maxAttempts): static
    {
        $copy = clone $this;
        $copy->maxAttempts = $maxAttempts === null ? null : Validator::maxAttempts($maxAttempts);
        return $copy;
    }

    /** A copy with its retry backoff set (null: unset). */
    public function withBackoff(?Backoff $backoff): static
    {
        $copy = clone $this;
        $copy->backoff = $backoff;
        return $copy;
    }

    /**
     * A copy carrying the producer's W3C trace context; null or "": none.
     *
     * @throws InvalidArgumentException when it is not a traceparent
     */
    public function withTraceparent(?string $traceparent): static
    {
        $copy = clone $this;
        $copy->traceparent = Traceparent::check($traceparent);
        return $copy;
    }

    /** Reservations allowed before dead letters (0 = no limit), or null when not set. */
    public function getMaxAttempts(): ?int
    {
        return $this->maxAttempts;
    }

    /** The retry backoff, or null when not set. */
    public function getBackoff(): ?Backoff
    {
        return $this->backoff;
    }

    /** Whether push() takes it (1.x's validate(): id, topic and body not empty), maxAttempts in range too. */
    public function validate(): bool
    {
        if ($this->body === '') {
            return false;
        }
        try {
            Validator::name('id', $this->id);
            Validator::name('topic', $this->topic);
            if ($this->maxAttempts !== null) {
                Validator::maxAttempts($this->maxAttempts);
            }
        } catch (InvalidArgumentException) {
            return false;
        }
        return true;
    }
}
