<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\InvalidArgumentException;

/**
 * One job: an id (unique per job, chosen by the caller), the topic whose
 * ready queue it goes to, and an opaque, binary-safe body.
 *
 * Built like mix/delayer-client's Message, from an array:
 *
 *     $message = new Message(['id' => 'order:42:cancel', 'topic' => 'order', 'body' => '{"order":42}']);
 *
 * or with {@see Message::create()}. Missing keys stay "" (the id and topic
 * are checked when the message is pushed); int, float and Stringable values
 * are converted to strings; unknown keys are rejected.
 */
class Message
{
    /** @var string the job id (1..200 bytes, no whitespace, control characters or braces) */
    public string $id = '';

    /** @var string the topic (same rules as the id) */
    public string $topic = '';

    /** @var string the body: any bytes, may be empty */
    public string $body = '';

    /**
     * @param array{id?: string|int|float|\Stringable, topic?: string|int|float|\Stringable, body?: string|int|float|\Stringable|null} $config
     * @throws InvalidArgumentException on an unknown key or a value that is not a string
     */
    public function __construct(array $config = [])
    {
        foreach ($config as $name => $value) {
            if ($name !== 'id' && $name !== 'topic' && $name !== 'body') {
                throw new InvalidArgumentException(sprintf(
                    'unknown Message field %s (expected id, topic, body)',
                    var_export($name, true)
                ));
            }
            if ($value === null && $name === 'body') {
                $value = '';
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

    /**
     * Whether the message would pass push()'s checks on id and topic
     * (mix/delayer-client had this method; unlike it, an empty body is valid).
     */
    public function validate(): bool
    {
        try {
            Validator::name('id', $this->id);
            Validator::name('topic', $this->topic);
        } catch (InvalidArgumentException) {
            return false;
        }
        return true;
    }
}
