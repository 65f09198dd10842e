"""Which network addresses a service may connect to on a user's behalf (SSRF): only globally
routable ones, judged after unwrapping every IPv6 form that carries an IPv4 address, never a
cloud metadata service nor a link-local address (where metadata services answer), plus the
networks an operator allows (development, an internal proxy).

Pure decisions, no I/O: the connect-time guard (`servicekit.net.guard`) and the checks of a
URL when it is stored both ask this module.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# Instance metadata services (AWS, GCP, Azure, Alibaba, Oracle, AWS ECS/EKS Pod Identity):
# refused even inside an allowed network, since they hand out credentials.
METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",
        "169.254.170.2",
        "169.254.170.23",
        "100.100.100.200",
        "192.0.0.192",
        "168.63.129.16",
        "fd00:ec2::254",
        "fd00:ec2::23",
    )
)
_IPV4_MAPPED = ipaddress.ip_network("::ffff:0:0/96")
_IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
_NAT64_WELL_KNOWN = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL_USE = ipaddress.ip_network("64:ff9b:1::/48")
# RFC 6052 §2.2: where the IPv4 address's bytes sit for each prefix length (byte 8, the "u"
# octet, is skipped). A local-use prefix may be any of these lengths inside its /48, so every
# layout is read, and a destination is refused when any reading is.
_RFC6052_LAYOUTS = (
    (4, 5, 6, 7),
    (5, 6, 7, 9),
    (6, 7, 9, 10),
    (7, 9, 10, 11),
    (9, 10, 11, 12),
    (12, 13, 14, 15),
)


class AddressRefused(OSError):
    """A destination the policy refuses. An `OSError`, so that refusing inside a connector
    fails the connection like any other connect error."""


def _low_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)


def embedded_ipv4(address: IPAddress) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address stands for: IPv4-mapped, IPv4-translated,
    IPv4-compatible, 6to4, NAT64 (well-known and local-use prefixes) and Teredo (server and
    client)."""
    if isinstance(address, ipaddress.IPv4Address):
        return []
    found: list[ipaddress.IPv4Address] = []
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    if address in _IPV4_TRANSLATED or address in _NAT64_WELL_KNOWN:
        found.append(_low_ipv4(address))
    if address in _NAT64_LOCAL_USE:
        packed = address.packed
        found += [
            ipaddress.IPv4Address(bytes(packed[i] for i in layout)) for layout in _RFC6052_LAYOUTS
        ]
    if address in _IPV4_COMPATIBLE and int(address) > 1:
        found.append(_low_ipv4(address))
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    return found


# Every network: what `AddressPolicy.development()` allows, metadata and link-local aside.
EVERY_NETWORK = ("0.0.0.0/0", "::/0")


@dataclass(frozen=True)
class AddressPolicy:
    """Globally routable addresses only, except `allowed` networks; metadata and link-local
    addresses never, whatever is allowed."""

    allowed: tuple[IPNetwork, ...] = field(default=())

    @classmethod
    def allowing(cls, networks: Iterable[str]) -> AddressPolicy:
        return cls(tuple(ipaddress.ip_network(n, strict=False) for n in networks))

    @classmethod
    def development(cls) -> AddressPolicy:
        """Loopback and private networks allowed (a developer's receivers run there), cloud
        metadata and link-local still refused: development stacks run on cloud machines too."""
        return cls.allowing(EVERY_NETWORK)

    def _acceptable(self, address: IPAddress) -> bool:
        return address.is_global or any(
            address.version == net.version and address in net for net in self.allowed
        )

    def refusal(self, address: IPAddress) -> str | None:
        """Why `address` is refused, or None when it may be used."""
        embedded = embedded_ipv4(address)
        forms: list[IPAddress] = [address, *embedded]
        if any(form in METADATA_ADDRESSES for form in forms):
            return f"{address} is a cloud metadata address"
        if any(form.is_link_local for form in forms):
            # 169.254.0.0/16 and fe80::/10: the metadata services' networks (providers add
            # addresses there), never a receiver's; refused even inside an allowed network.
            return f"{address} is a link-local address (where cloud metadata services answer)"
        if isinstance(address, ipaddress.IPv6Address) and (
            address.ipv4_mapped is not None
            or address in _IPV4_TRANSLATED
            or address.sixtofour is not None
        ):
            # The IPv6 wrapper itself is "reserved" (6to4: private before Python 3.11.4,
            # global after), so only what it carries counts, whatever the Python release.
            forms = list[IPAddress](embedded)
        for form in forms:
            # Python 3.11 calls a few special forms global (::ffff:8.8.8.8 aside, ::/96 and
            # 6to4 are); the embedded IPv4 address is judged on its own below.
            if not self._acceptable(form):
                shown = f"{address} ({form})" if form != address else str(address)
                return f"{shown} is not a public address"
        if address.is_multicast or address.is_unspecified:
            return f"{address} is not a unicast address"
        return None

    def check(self, address: IPAddress) -> None:
        reason = self.refusal(address)
        if reason is not None:
            raise AddressRefused(reason)

    def check_text(self, text: str) -> IPAddress:
        """An address as a resolver prints it (IPv6 may carry a `%zone`)."""
        address = ipaddress.ip_address(text.split("%", 1)[0])
        self.check(address)
        return address


def _ipv4_number(part: str) -> int | None:
    """One part of an IPv4 host as URL parsers read it: decimal, 0x hex or 0-led octal."""
    try:
        if part[:2].lower() == "0x":
            return int(part[2:] or "0", 16)
        if len(part) > 1 and part.startswith("0"):
            return int(part[1:], 8)
        return int(part, 10) if part.isdigit() else None
    except ValueError:
        return None


def host_address(host: str) -> IPAddress | None:
    """The address a URL's host names without DNS: an IPv6 literal, a dotted quad, or any
    legacy IPv4 spelling (`2130706433`, `0x7f.1`, `0177.0.0.1`, `127.1`) that browsers and
    `inet_aton` accept. None for a host name. A host that ends in a number but is no valid
    address raises ValueError, as the URL standard refuses it."""
    host = host.strip("[]").lower()
    if ":" in host:
        return ipaddress.IPv6Address(host.split("%", 1)[0])
    parts = host.split(".")
    if parts and parts[-1] == "" and len(parts) > 1:
        parts = parts[:-1]
    last = parts[-1] if parts else ""
    hex_digits = last[2:].lower()
    ends_in_number = last.isdigit() or (
        last[:2].lower() == "0x" and all(c in "0123456789abcdef" for c in hex_digits)
    )
    if not ends_in_number:
        return None
    numbers = [_ipv4_number(p) if p else None for p in parts]
    if len(numbers) > 4 or any(n is None for n in numbers):
        raise ValueError(f"{host!r} is not a valid IPv4 address")
    values = [n for n in numbers if n is not None]
    *head, tail = values
    if any(n > 255 for n in head) or tail >= 256 ** (5 - len(values)):
        raise ValueError(f"{host!r} is not a valid IPv4 address")
    value = tail
    for index, n in enumerate(head):
        value += n << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def url_host(url: str) -> tuple[str, int]:
    """Host and port of an absolute http(s) URL, or ValueError."""
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ValueError("the URL must be an absolute http or https URL")
    port = parts.port  # ValueError for a bad port
    return parts.hostname, port or (443 if parts.scheme == "https" else 80)


def literal_refusal(url: str, policy: AddressPolicy) -> str | None:
    """Why a URL whose host is an address (in any spelling) is refused; None for host names
    (those are judged when they resolve) and acceptable addresses."""
    host, _ = url_host(url)
    try:
        address = host_address(host)
    except ValueError as exc:
        return str(exc)
    return None if address is None else policy.refusal(address)
