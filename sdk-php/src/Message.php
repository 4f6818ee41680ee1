<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\InvalidArgumentException;

/**
 * One job: an id (chosen by the caller, unique across all topics), the topic whose
 * ready queue it goes to, and an opaque, binary-safe body.
 *
 * Built like mix/delayer-client's Message, from an array:
 *
 *     $message = new Message(['id' => 'order:42:cancel', 'topic' => 'order', 'body' => '{"order":42}']);
 *
 * or with {@see Message::create()}. Missing keys stay "" (the id and topic
 * are checked when the message is pushed); int, float and Stringable values
 * are converted to strings; any other key becomes a property of the message,
 * as in 1.x (it is not pushed: only id, topic, body and the retry settings
 * are).
 *
 * Retry settings for the at-least-once mode (read only by reserve and its
 * kin; classic pop ignores them) are optional, and left out the bucket is
 * exactly Delayer 1.x's:
 *
 *     $message = Message::create('mail:1', 'mail', $body)
 *         ->withMaxAttempts(5)                    // then dead letters; 0 = no limit
 *         ->withBackoff(Backoff::exponential(10, 600));
 *
 * (also as array keys: `new Message([..., 'maxAttempts' => 5, 'backoff' => Backoff::fixed(30)])`).
 * A W3C trace context rides along the same way: `->withTraceparent($tp)`
 * or `'traceparent' => $tp` ({@see Traceparent}).
 * Unset, reserve uses max_attempts 25 and an exponential backoff from 1 s
 * doubling up to 1 h.
 */
#[\AllowDynamicProperties]
class Message
{
    use JobAccessors;

    /**
     * @var string the job id (any non-empty string); unique across all
     *             topics: pushing an id that a job of any topic has replaces
     *             that job (see Client::push())
     */
    public string $id = '';

    /** @var string the topic (any non-empty string) */
    public string $topic = '';

    /** @var string the body: any bytes, may be empty */
    public string $body = '';

    /**
     * @var int|null reservations allowed before the job goes to dead letters
     *               (0 to 1000000, 0 = no limit); null: not sent (reserve
     *               uses 25). Checked again when the message is pushed.
     */
    public ?int $maxAttempts = null;

    /** @var Backoff|null the wait before a retry; null: not sent (exponential, 1 s doubling to 1 h) */
    public ?Backoff $backoff = null;

    /**
     * @var string|null the producer's W3C trace context ({@see Traceparent}):
     *                  kept with the job and handed back to its consumer; on a
     *                  popped message, the one pushed (null: none)
     */
    public ?string $traceparent = null;

    /**
     * @param array{id?: string|int|float|\Stringable, topic?: string|int|float|\Stringable, body?: string|int|float|\Stringable|null, maxAttempts?: int|null, backoff?: Backoff|null, traceparent?: string|null} $config
     * @throws InvalidArgumentException on a value of the wrong type, or a
     *                                  maxAttempts out of range
     */
    public function __construct(array $config = [])
    {
        foreach ($config as $name => $value) {
            if ($name === 'maxAttempts') {
                if ($value !== null && !\is_int($value)) {
                    throw new InvalidArgumentException('Message maxAttempts must be an int or null, got ' . get_debug_type($value));
                }
                $this->maxAttempts = $value === null ? null : Validator::maxAttempts($value);
                continue;
            }
            if ($name === 'traceparent') {
                if ($value !== null && !\is_string($value)) {
                    throw new InvalidArgumentException('Message traceparent must be a string or null, got ' . get_debug_type($value));
                }
                $this->traceparent = Traceparent::check($value);
                continue;
            }
            if ($name === 'backoff') {
                if ($value !== null && !$value instanceof Backoff) {
                    throw new InvalidArgumentException('Message backoff must be a Delayer\\Backoff or null, got ' . get_debug_type($value));
                }
                $this->backoff = $value;
                continue;
            }
            if ($name !== 'id' && $name !== 'topic' && $name !== 'body') {
                if (!\is_string($name) || $name === '') {
                    throw new InvalidArgumentException(sprintf('Message key %s is not a property name', var_export($name, true)));
                }
                $this->$name = $value; // 1.x kept every key as a property
                continue;
            }
            if ($value === null) {
                $value = ''; // 1.x left it null; validate() and push() refuse it alike
            }
            if (\is_int($value) || \is_float($value) || $value instanceof \Stringable) {
                $value = (string) $value;
            }
            if (!\is_string($value)) {
                throw new InvalidArgumentException(sprintf(
                    'Message %s must be a string, got %s',
                    $name,
                    get_debug_type($value)
                ));
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
     * A copy of this message with max_attempts set: after that many
     * reservations fail (released, or their ttr ran out), the job goes to
     * its topic's dead letters instead of being retried. 0 means no limit;
     * null leaves it unset (reserve then uses 25).
     *
     * @param int|null $maxAttempts 0 to 1000000, or null
     * @throws InvalidArgumentException when out of range
     */
    public function withMaxAttempts(?int $maxAttempts): static
    {
        $copy = clone $this;
        $copy->maxAttempts = $maxAttempts === null ? null : Validator::maxAttempts($maxAttempts);
        return $copy;
    }

    /**
     * A copy of this message with its retry backoff set (null leaves it
     * unset: exponential from 1 s, doubling up to 1 h).
     */
    public function withBackoff(?Backoff $backoff): static
    {
        $copy = clone $this;
        $copy->backoff = $backoff;
        return $copy;
    }

    /**
     * A copy of this message carrying the producer's W3C trace context
     * (`00-<32 hex>-<16 hex>-<2 hex>`, as the `traceparent` header), handed
     * back with the job by pop, reserve and the Worker; null or "": none.
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

    /**
     * Whether Client::push() takes the message: id, topic and body not
     * empty, as mix/delayer-client 1.x's validate() said (Client::schedule()
     * also takes an empty body), and maxAttempts in range.
     */
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
