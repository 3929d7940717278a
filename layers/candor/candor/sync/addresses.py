"""Where a site sync may connect: public addresses only, checked on every connection.

A sync fetches whatever URLs a site's sitemap, robots.txt, links and redirects name,
and on AWS it runs inside the owner's account: a URL that reaches the metadata
service (169.254.169.254), the Lambda runtime API on loopback, or a host on a
private network would put what answers there into the index, where visitors read
it. So every connection the sync's HTTP client makes goes through `GuardedBackend`:
the host name is resolved here, every address it resolves to is checked, and the
socket is opened to one of those checked addresses, never by name. A name that
resolves to a public address when it is checked cannot answer with a private one
when it is connected to (DNS rebinding), and a name with one bad address among
good ones is refused whole.

Refused: loopback, private, link-local, multicast, reserved, unspecified, shared
(100.64/10), documentation and benchmarking ranges, and the IPv4-mapped, 6to4,
Teredo and NAT64 forms of any of them: everything `ipaddress` does not call global. The one
exception is the owner's own: an address written as the start URL's host (or
`localhost`, which means loopback) is the site the owner asked for, as when
`candor sync http://127.0.0.1:8000/` reads a site served on the same machine.
That exception holds for the addresses named, not for a name that resolves to
them.
"""

from __future__ import annotations

import ipaddress
import socket
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import httpcore

from candor.sync.errors import SyncError

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
# host, port -> the addresses it resolves to (as strings, any order).
Resolver = Callable[[str, int], list[str]]

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain"})
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


class RefusedAddress(SyncError):
    """A connection the sync must not make; the message says which address and why."""


def system_resolver(host: str, port: int) -> list[str]:
    """Every address the system's resolver gives for `host` (IPv4 and IPv6)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        raise httpcore.ConnectError(f"cannot resolve {host}: {error}") from error
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def literal_address(host: str) -> Address | None:
    """The address `host` is written as ("127.0.0.1", "::1", "[::1]"), or None for a name."""
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


def why_refused(address: Address) -> str | None:
    """Why a connection to `address` is refused, or None when it is a public address."""
    if isinstance(address, ipaddress.IPv6Address):
        # The IPv4 address inside an IPv6 form decides (::ffff:169.254.169.254 is the
        # metadata service; 2002:a9fe:a9fe:: is 6to4 for it).
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is None and address.teredo is not None:
            embedded = address.teredo[1]
        if embedded is None and address in NAT64:
            # DNS64 gives a public IPv4 site an address here on an IPv6-only network.
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if embedded is not None:
            reason = why_refused(embedded)
            return f"{reason} (inside {address})" if reason else None
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address (the metadata service lives there)"
    if address.is_multicast:
        return "a multicast address"
    if address.is_unspecified:
        return "the unspecified address"
    if address.is_private:
        return "a private address"
    if address.is_reserved:
        return "a reserved address"
    if not address.is_global:
        return "not a public address"
    return None


@dataclass(frozen=True)
class AddressGuard:
    """Resolves a host and says whether the sync may connect to it.

    `named` is the host the owner wrote as the start URL and `permitted` the
    addresses it may reach whatever their range: the address itself when the host
    is written as one, loopback for `localhost`. Any other host, even one that
    resolves to a permitted address, gets the full check.
    """

    resolver: Resolver = system_resolver
    named: str | None = None
    permitted: frozenset[Address] = field(default_factory=frozenset)

    @classmethod
    def for_site(cls, host: str, *, resolver: Resolver = system_resolver) -> AddressGuard:
        """The guard of a sync whose start URL names `host`."""
        host = host.lower()
        named = literal_address(host)
        if named is not None:
            return cls(resolver, host, frozenset({named}))
        if host in LOOPBACK_NAMES:
            loopback = {ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")}
            return cls(resolver, host, frozenset(loopback))
        return cls(resolver)

    def addresses(self, host: str, port: int) -> list[str]:
        """The addresses to connect to for `host`: all of them checked, or RefusedAddress."""
        named = literal_address(host)
        found = [str(named)] if named is not None else self.resolver(host, port)
        if not found:
            raise httpcore.ConnectError(f"{host} resolves to no address")
        vouched = self.permitted if self.named is not None and host.lower() == self.named else ()
        for text in found:
            address = literal_address(text)
            if address is None:
                raise RefusedAddress(f"{host} resolved to {text!r}, which is not an address")
            if address in vouched:
                continue
            reason = why_refused(address)
            if reason is not None:
                raise RefusedAddress(f"{host} resolves to {address}, {reason}")
        return found


class GuardedBackend(httpcore.NetworkBackend):
    """httpcore's own socket backend, connecting only to addresses the guard passed.

    TLS still checks the certificate against the host name: httpcore gives the
    request's host to start_tls, not the address connected to.
    """

    def __init__(self, guard: AddressGuard, inner: httpcore.NetworkBackend | None = None) -> None:
        self.guard = guard
        self.inner = inner or httpcore.SyncBackend()
        self.connected: list[tuple[str, int]] = []

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        failure: Exception | None = None
        for address in self.guard.addresses(host, port):
            try:
                stream = self.inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except httpcore.ConnectError as error:
                failure = error
                continue
            self.connected.append((address, port))
            return stream
        assert failure is not None
        raise failure

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        raise RefusedAddress("a site sync connects to no unix socket")

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)
