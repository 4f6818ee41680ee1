<?php

declare(strict_types=1);

namespace Delayer;

/**
 * The key names and scripts one call needs in the client's layout ({@see Keys::names()}).
 *
 * @internal used by {@see Calls} and {@see Client}
 */
final class Names
{
    /**
     * @param string|null           $ready       the topic's ready list (null without a topic), as $dead
     * @param array<string, string> $scripts     the layout's own script for a classic one ({@see Scripts::PER_TOPIC}), [] in the classic layout
     * @param list<string>          $counts      push, push_many, remove and dead's last key: the scheduled counts (classic), or none
     * @param string                $releaseKey  release's KEYS[4]: the scheduled counts (release.lua), or the topic's dead list (release_topic.lua)
     * @param list<string>          $releaseArgv release's leading ARGV: the bucket prefix, and the dead-letter prefix in release.lua only
     * @param string|null           $flow        the topic's flow-control hash and $gate the list a resume writes (null without a topic)
     * @param string                $flowPoolPrefix what a classic flow pool's name starts with (a paused topic's due ids set aside), "" per topic (held jobs stay in the pool)
     * @param list<string>          $removeTail  remove's ARGV after the id: the flow-pool prefix (remove.lua), or none (remove_topic.lua)
     * @param list<string>          $flowKeys    flow.lua's KEYS after the hash and gate: the flow topics and the topic's flow pool
     *                                           (classic), or the topic's pool (flow_topic.lua); [] without a topic
     */
    public function __construct(
        public readonly ?string $topic,
        public readonly string $pool,
        public readonly string $bucketPrefix,
        public readonly ?string $ready,
        public readonly string $malformed,
        public readonly string $reserved,
        public readonly string $receiptSeq,
        public readonly ?string $dead,
        public readonly string $wake,
        public readonly string $outcomes,
        private readonly array $scripts,
        public readonly array $counts,
        public readonly string $releaseKey,
        public readonly array $releaseArgv,
        public readonly ?string $flow,
        public readonly ?string $gate,
        public readonly string $flowPoolPrefix,
        public readonly array $removeTail,
        public readonly array $flowKeys,
    ) {
    }

    /** @param value-of<Scripts::NAMES> $name a classic script: this layout's one for it (push_topic for push, ...) */
    public function script(string $name): string
    {
        return $this->scripts[$name] ?? $name;
    }

    public function bucket(string $id): string
    {
        return $this->bucketPrefix . $id;
    }
}
