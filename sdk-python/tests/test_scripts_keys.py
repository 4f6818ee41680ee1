from __future__ import annotations

from pathlib import Path

import pytest

from delayer import Keys, scripts

REPO_LUA = Path(__file__).resolve().parents[2] / "lua"
PKG_LUA = Path(__file__).resolve().parents[1] / "src" / "delayer" / "lua"


@pytest.mark.parametrize("name", scripts.NAMES)
def test_shipped_script_is_byte_identical_to_repository(name: str) -> None:
    repo = (REPO_LUA / f"{name}.lua").read_bytes()
    assert (PKG_LUA / f"{name}.lua").read_bytes() == repo
    # and what the installed package actually loads
    assert scripts.source(name) == repo


def test_only_the_client_scripts_are_shipped() -> None:
    # move.lua is the server's alone; release.lua is shipped for its "held" mode
    assert sorted(p.name for p in PKG_LUA.glob("*.lua")) == [
        "ack.lua",
        "dead.lua",
        "dead_topic.lua",
        "flow.lua",
        "flow_topic.lua",
        "list.lua",
        "lookup.lua",
        "pop.lua",
        "push.lua",
        "push_many.lua",
        "push_many_topic.lua",
        "push_topic.lua",
        "release.lua",
        "release_topic.lua",
        "remove.lua",
        "remove_topic.lua",
        "reschedule.lua",
        "reserve.lua",
        "stats.lua",
        "take.lua",
        "touch.lua",
    ]
    assert sorted(scripts.NAMES) == sorted(p.stem for p in PKG_LUA.glob("*.lua"))


def test_key_names() -> None:
    k = Keys("shop:delayer:")
    assert k.job_pool == "shop:delayer:job_pool"
    assert k.job_bucket("o-1") == "shop:delayer:job_bucket:o-1"
    assert k.ready_queue("mail") == "shop:delayer:ready_queue:mail"
    assert k.malformed == "shop:delayer:malformed"
    assert k.bucket_prefix == "shop:delayer:job_bucket:"
    assert k.reserved == "shop:delayer:reserved"
    assert k.dead("mail") == "shop:delayer:dead:mail"
    assert k.receipt_seq == "shop:delayer:receipt_seq"
    assert k.wake == "shop:delayer:wake"
    assert k.flow("mail") == "shop:delayer:flow:mail"
    assert k.gate("mail") == "shop:delayer:flow_gate:mail"
    assert (k.names("mail").flow, k.names("mail").gate) == (k.flow("mail"), k.gate("mail"))
    assert k.flow_pool("mail") == "shop:delayer:flow_pool:mail"
    assert k.flow_topics == "shop:delayer:flow_topics"
    assert k.names("mail").flow_tail == (k.flow_topics, k.flow_pool("mail"))
    topic = Keys("shop:", "topic").names("mail")
    assert (topic.flow, topic.gate, topic.ready) == ("shop:{mail}:flow", "shop:{mail}:gate", "shop:{mail}:ready")
    assert topic.flow_tail == ("shop:{mail}:pool",)
    assert Keys().job_pool == "delayer:job_pool"
