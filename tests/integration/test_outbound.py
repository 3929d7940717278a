"""Requests candor sends refuse internal addresses unless the owner named them (a receiver
on loopback stands in for a webhook)."""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest

from candor import outbound
from candor.handoffs import forward
from candor.handoffs.store import Handoff
from candor.handoffs.transcript import Content
from tests.support.webhook_server import webhook_receiver

pytestmark = pytest.mark.integration


def resolving_to(*addresses: str) -> outbound.Resolver:
    def resolve(host: str, port: int) -> Sequence[str]:
        return addresses

    return resolve


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.9",
        "192.168.1.1",
        "169.254.169.254",  # the instance metadata service
        "100.100.100.200",
        "100.64.0.1",
        "0.0.0.0",
        "::1",
        "fe80::1",
        "fd00:ec2::254",
        "::ffff:10.0.0.1",  # an IPv4-mapped private address
        "224.0.0.1",
    ],
)
def test_a_name_that_resolves_to_an_internal_address_is_refused(address: str) -> None:
    with pytest.raises(outbound.AddressRefusedError):
        outbound.checked_addresses("hooks.example.com", 443, resolve=resolving_to(address))


def test_one_internal_address_among_public_ones_refuses_the_name() -> None:
    with pytest.raises(outbound.AddressRefusedError):
        outbound.checked_addresses(
            "hooks.example.com", 443, resolve=resolving_to("93.184.215.14", "10.0.0.7")
        )


def test_a_public_address_passes() -> None:
    assert outbound.checked_addresses(
        "hooks.example.com", 443, resolve=resolving_to("93.184.215.14")
    ) == ["93.184.215.14"]


def test_an_address_the_owner_named_passes() -> None:
    def never(host: str, port: int) -> Sequence[str]:
        raise AssertionError("an IP literal needs no lookup")

    assert outbound.checked_addresses("127.0.0.1", 80, resolve=never) == ["127.0.0.1"]
    assert outbound.checked_addresses("localhost", 80, resolve=resolving_to("127.0.0.1"))
    assert outbound.checked_addresses(
        "hooks.internal", 80, allowed_hosts=("hooks.internal",), resolve=resolving_to("10.0.0.7")
    ) == ["10.0.0.7"]


def test_the_request_goes_to_the_address_that_was_checked_not_to_a_second_lookup() -> None:
    # DNS rebinding: a name that answers one address to the check and another to the
    # connection. Both answers are loopback here (the receiver listens on 127.0.0.1
    # only), so a second lookup would show as a refused connection, not as traffic.
    answers = iter([["127.0.0.1"], ["127.0.0.2"]])

    def rebinding(host: str, port: int) -> Sequence[str]:
        return next(answers)

    with webhook_receiver() as receiver:
        port = receiver.url.split(":")[2].split("/")[0]
        reply = outbound.post(
            f"http://rebind.example.com:{port}/hooks/candor",
            b"{}",
            {"content-type": "application/json"},
            timeout=5,
            allowed_hosts=("rebind.example.com",),
            resolve=rebinding,
        )
        assert reply.status == 200
        assert receiver.received[0].headers["host"] == f"rebind.example.com:{port}"
    assert next(answers) == ["127.0.0.2"], "the name was looked up twice"


def test_a_webhook_behind_a_name_that_resolves_inside_is_never_sent() -> None:
    content = Content("v@example.org", "help", "Docs", "conversation")
    handoff = Handoff("h" * 32, "s", time.time(), int(time.time()) + 60, content.to_json())
    with webhook_receiver() as receiver:
        port = receiver.url.split(":")[2].split("/")[0]
        with pytest.raises(forward.DeliveryError, match="internal address"):
            forward.send_webhook(
                f"http://hooks.example.com:{port}/hooks/candor",
                handoff,
                content,
                secret="s" * 20,
                resolve=resolving_to("127.0.0.1"),
            )
        assert receiver.received == []


def test_a_redirect_is_not_followed_and_fails_the_attempt() -> None:
    content = Content("v@example.org", "help", "Docs", "conversation")
    handoff = Handoff("h" * 32, "s", time.time(), int(time.time()) + 60, content.to_json())
    with webhook_receiver(statuses=[302]) as receiver:
        with pytest.raises(forward.DeliveryError, match="302"):
            forward.send_webhook(receiver.url, handoff, content, secret="s" * 20)
        assert len(receiver.received) == 1
