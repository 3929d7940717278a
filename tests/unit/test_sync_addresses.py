"""The SSRF guard refuses every address that is not public, in every spelling of it."""

from __future__ import annotations

import pytest

from candor.sync.addresses import AddressGuard, RefusedAddress, literal_address, why_refused

pytestmark = pytest.mark.unit

REFUSED = [
    "127.0.0.1",
    "127.1.2.3",
    "::1",
    "10.0.0.1",
    "172.16.5.4",
    "192.168.1.1",
    "169.254.169.254",  # the metadata service
    "fd00:ec2::254",  # its IPv6 address on EC2
    "fe80::1",
    "100.64.0.1",  # shared address space (carrier-grade NAT)
    "0.0.0.0",
    "224.0.0.1",
    "ff02::1",
    "240.0.0.1",
    "255.255.255.255",
    "198.18.0.1",
    "192.0.2.10",
    "2001:db8::1",
    "::ffff:169.254.169.254",  # IPv4-mapped
    "::ffff:127.0.0.1",
    "2002:a9fe:a9fe::1",  # 6to4 around the metadata address
    "64:ff9b::a9fe:a9fe",  # NAT64 around it
    "64:ff9b::7f00:1",
]


@pytest.mark.parametrize("address", REFUSED)
def test_an_address_that_is_not_public_is_refused(address: str) -> None:
    parsed = literal_address(address)
    assert parsed is not None
    assert why_refused(parsed) is not None
    with pytest.raises(RefusedAddress):
        AddressGuard(lambda host, port: [address]).addresses("docs.example.com", 443)


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:2800:220:1::1", "64:ff9b::808:808"])
def test_a_public_address_passes(address: str) -> None:
    assert AddressGuard(lambda host, port: [address]).addresses("docs.example.com", 443) == [
        address
    ]


def test_one_refused_address_among_public_ones_refuses_the_name() -> None:
    guard = AddressGuard(lambda host, port: ["93.184.216.34", "10.0.0.1"])

    with pytest.raises(RefusedAddress, match=r"10\.0\.0\.1"):
        guard.addresses("docs.example.com", 443)


def test_a_host_written_as_a_number_is_checked_as_the_address_it_means() -> None:
    # 2852039166 is 169.254.169.254 written as one number; the system resolver reads
    # it as that address without asking DNS.
    with pytest.raises(RefusedAddress, match=r"169\.254\.169\.254"):
        AddressGuard().addresses("2852039166", 80)


def test_the_start_urls_own_address_is_permitted_for_that_host_alone() -> None:
    guard = AddressGuard.for_site("127.0.0.1", resolver=lambda host, port: ["127.0.0.1"])

    assert guard.addresses("127.0.0.1", 8000) == ["127.0.0.1"]
    # A name that resolves to it is another host: refused.
    with pytest.raises(RefusedAddress):
        guard.addresses("sneaky.example", 80)
    # And the start host's exception is the address named, not its neighbours.
    with pytest.raises(RefusedAddress):
        guard.addresses("127.0.0.2", 8000)


def test_localhost_as_the_start_host_permits_loopback_only() -> None:
    guard = AddressGuard.for_site("localhost", resolver=lambda host, port: ["127.0.0.1", "::1"])
    assert guard.addresses("localhost", 8000) == ["127.0.0.1", "::1"]

    rebound = AddressGuard.for_site("localhost", resolver=lambda host, port: ["10.0.0.1"])
    with pytest.raises(RefusedAddress):
        rebound.addresses("localhost", 8000)


def test_a_resolver_answer_that_is_not_an_address_is_refused() -> None:
    with pytest.raises(RefusedAddress):
        AddressGuard(lambda host, port: ["not-an-address"]).addresses("docs.example.com", 80)
