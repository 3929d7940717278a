"""E-mail addresses: checked with email-validator, never trusted into a header.

email-validator (the library pydantic's EmailStr uses) knows the address syntax of
RFC 5322 and its internationalised forms (RFC 6531), which a regular expression
gets wrong both ways; it refuses CR, LF and every other character that could end
a header and start another. Deliverability (a DNS lookup) is not checked: a
request must not wait on DNS, and the owner replies to whatever the visitor typed.
"""

from __future__ import annotations

from email_validator import EmailNotValidError, validate_email

MAX_ADDRESS_CHARS = 254


def normalised_address(value: str) -> str:
    """The address in its normal form; ValueError with the reason when it is not one."""
    if len(value) > MAX_ADDRESS_CHARS:
        raise ValueError(f"an e-mail address has at most {MAX_ADDRESS_CHARS} characters")
    try:
        checked = validate_email(value, check_deliverability=False)
    except EmailNotValidError as error:
        raise ValueError(f"not a valid e-mail address: {error}") from None
    return str(checked.normalized)
