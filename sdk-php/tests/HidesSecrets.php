<?php

declare(strict_types=1);

namespace Delayer\Tests;

/**
 * The one check that a secret (a password) appears nowhere in an exception:
 * not in its message, its string form, nor in any previous exception's
 * message or stack trace (which carries call arguments).
 */
trait HidesSecrets
{
    private static function assertSecretHidden(\Throwable $e, string $secret): void
    {
        for ($x = $e; $x !== null; $x = $x->getPrevious()) {
            self::assertStringNotContainsString($secret, $x->getMessage());
            self::assertStringNotContainsString($secret, $x->getTraceAsString());
        }
        self::assertStringNotContainsString($secret, (string) $e);
    }
}
