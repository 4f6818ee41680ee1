<?php

declare(strict_types=1);

namespace Delayer\Tests;

/**
 * A SUBSCRIBE on its own socket, read message by message (RESP), for the
 * wake messages of the tests above.
 */
final class WakeListener
{
    /** @var resource */
    private $socket;

    public function __construct(int $port, string $channel)
    {
        $socket = stream_socket_client("tcp://127.0.0.1:{$port}", $errno, $error, 5);
        if ($socket === false) {
            throw new \RuntimeException("cannot connect: {$error}");
        }
        $this->socket = $socket;
        stream_set_timeout($this->socket, 10);
        fwrite($this->socket, sprintf("*2\r\n$9\r\nSUBSCRIBE\r\n$%d\r\n%s\r\n", \strlen($channel), $channel));
        $confirm = $this->read();
        if (!\is_array($confirm) || $confirm[0] !== 'subscribe') {
            throw new \RuntimeException('SUBSCRIBE failed');
        }
    }

    /** The next message's payload, waiting up to 10 s (null: none came). */
    public function next(): ?string
    {
        $message = $this->read();
        return \is_array($message) && $message[0] === 'message' ? (string) $message[2] : null;
    }

    /**
     * The first message $wanted accepts (messages before it are skipped).
     *
     * @param \Closure(string): bool $wanted
     */
    public function nextAfter(\Closure $wanted): ?string
    {
        while (($message = $this->next()) !== null) {
            if ($wanted($message)) {
                return $message;
            }
        }
        return null;
    }

    public function close(): void
    {
        fclose($this->socket);
    }

    private function read(): mixed
    {
        $line = fgets($this->socket);
        if ($line === false) {
            return null;
        }
        $line = rtrim($line, "\r\n");
        switch ($line[0]) {
            case '*':
                $items = [];
                for ($i = 0; $i < (int) substr($line, 1); $i++) {
                    $items[] = $this->read();
                }
                return $items;
            case '$':
                $length = (int) substr($line, 1);
                $data = '';
                while (\strlen($data) < $length + 2) {
                    $chunk = fread($this->socket, $length + 2 - \strlen($data));
                    if ($chunk === false || $chunk === '') {
                        return null;
                    }
                    $data .= $chunk;
                }
                return substr($data, 0, $length);
            case ':':
                return (int) substr($line, 1);
            default:
                return $line;
        }
    }
}
