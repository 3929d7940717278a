"""Requests candor sends to an address it was given: refused where they could reach inside.

A URL comes from configuration (the owner's hand-off webhook) or from a page
candor read; either can name, or resolve to, an address that only the machine
running candor can reach: the loopback, a private network, a link-local address,
or the cloud's instance metadata service (169.254.169.254, which hands out the
function's credentials). Every request candor sends to such a URL goes through
`checked_addresses` first, for every hop: the host is resolved once, each address
it resolves to is checked, and the connection goes to a checked address, never
to a second lookup that could answer differently (DNS rebinding). Redirects are
not followed.

An address the owner named is trusted: a URL whose host is an IP literal, or
`localhost`, names its address on purpose (a webhook receiver on the same
machine, a test's loopback server). A host name that resolves to such an address
is refused unless the owner listed that name (`allowed_hosts`).
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from candor.errors import CandorError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Sequence[str]]

# Instance metadata services: AWS (IPv4 and its IPv6 endpoint), Alibaba Cloud, and
# the link-local range they mostly live in (refused as link-local anyway).
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")
)
# What a refusal or an answer may echo of a response: enough for a log line.
MAX_RESPONSE_BYTES = 4096


class AddressRefusedError(CandorError):
    """The URL names or resolves to an address candor does not send requests to."""


class OutboundError(CandorError):
    """The request was sent, or tried, and did not succeed (no connection, a timeout)."""


def system_resolver(host: str, port: int) -> list[str]:
    """Every address `host` resolves to, as the system's resolver answers."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        raise OutboundError(f"{host}: the name does not resolve ({error.strerror})") from error
    return list(dict.fromkeys(str(info[4][0]) for info in found))


def _address(text: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(text.split("%", 1)[0])  # drop an IPv6 zone
    except ValueError:
        return None


def is_internal(address: IPAddress) -> bool:
    """Whether only this machine or its own network could reach `address`."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return is_internal(address.ipv4_mapped)
    if address in METADATA_ADDRESSES:
        return True
    # is_global is False for loopback, private, link-local, shared (100.64/10),
    # reserved, unspecified and documentation ranges; multicast is never a server.
    return not address.is_global or address.is_multicast


def named_by_owner(host: str) -> bool:
    """Whether the URL's host names its address itself (an IP literal, `localhost`)."""
    return host.lower() == "localhost" or _address(host) is not None


def checked_addresses(
    host: str,
    port: int,
    *,
    allowed_hosts: Collection[str] = (),
    resolve: Resolver = system_resolver,
) -> list[str]:
    """The addresses of `host` that a request may go to; AddressRefusedError if any is
    internal and the owner did not name it (every address is checked, so a name with
    one public and one private address is refused rather than tried in turn)."""
    trusted = named_by_owner(host) or host.lower() in {h.lower() for h in allowed_hosts}
    addresses = [host] if _address(host) is not None else list(resolve(host, port))
    if not addresses:
        raise OutboundError(f"{host}: the name resolves to no address")
    if not trusted:
        for text in addresses:
            parsed = _address(text)
            if parsed is None or is_internal(parsed):
                raise AddressRefusedError(
                    f"{host} resolves to {text}, an internal address candor does not send "
                    "requests to (name the host in the allowed hosts to permit it)"
                )
    return addresses


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes  # at most MAX_RESPONSE_BYTES


def post(
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    *,
    timeout: float,
    allowed_hosts: Collection[str] = (),
    resolve: Resolver = system_resolver,
) -> Reply:
    """POST `body` to `url` (http or https) at a checked address; no redirect is followed.

    Raises AddressRefusedError before anything is sent to an internal address, and
    OutboundError when no connection could be made or no answer came in `timeout`.
    """
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise AddressRefusedError("only absolute http(s) URLs are fetched")
    host = parts.hostname
    port = parts.port or (443 if parts.scheme == "https" else 80)
    address = checked_addresses(host, port, allowed_hosts=allowed_hosts, resolve=resolve)[0]
    connection: http.client.HTTPConnection
    if parts.scheme == "https":
        # Certificates are checked against the host name, while the socket goes to
        # the address checked above.
        connection = http.client.HTTPSConnection(
            host, port, timeout=timeout, context=ssl.create_default_context()
        )
    else:
        connection = http.client.HTTPConnection(host, port, timeout=timeout)

    def connect_to_checked(
        _address: tuple[str, int], timeout: float | None = None, source: object = None
    ) -> socket.socket:
        return socket.create_connection((address, port), timeout)

    connection._create_connection = connect_to_checked  # type: ignore[attr-defined]
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    try:
        connection.request("POST", target, body=body, headers=dict(headers))
        response = connection.getresponse()
        return Reply(response.status, response.read(MAX_RESPONSE_BYTES))
    except (OSError, http.client.HTTPException) as error:
        raise OutboundError(f"POST to {host}: {type(error).__name__}: {error}") from error
    finally:
        connection.close()
