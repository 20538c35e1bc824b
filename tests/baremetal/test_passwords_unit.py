"""The rescue password's SHA-crypt hash, against hashes glibc's crypt(3) made of the same passwords and salt."""

from __future__ import annotations

import pytest

from corral.baremetal.domain import passwords


@pytest.mark.parametrize(("algorithm", "password", "expected"), [
    ("sha256", "Hello world!", "$5$saltstring$5B8vYYiY.CVt1RlTTf8KbXBH3hsxY/GNooZaBBGWEc5"),
    ("sha256", "", "$5$saltstring$FdNfA4gXqvCeO6iZs7G/.wwwoywYZqo0l1pwmfWaBA7"),
    ("sha256", "x" * 70, "$5$saltstring$D1DsTGKixUiITWGe4c3jtSicDXvgr6h50agFIGXAx6/"),
    ("sha512", "Hello world!", "$6$saltstring$svn8UoSVapNtMuq1ukKS4tPQd8iKwSMHWjl/O817G3uBnIFNjnQJuesI68u4OTLiBFdcb"
                               "YEdFCoEOfaS35inz1"),
    ("sha512", "rescue-pw", "$6$saltstring$SxmH2V9CqO0Z2fB9E/juhDKXv1bIrFmC1gCtf/ZhvhNlyOIRxukjQwraGp/RRYu5ZOKuzL5"
                            "rnPRPRCNayYps1."),
])
def test_sha_crypt_matches_glibc(algorithm: str, password: str, expected: str) -> None:
    assert passwords.hash_password(password, algorithm, "saltstring") == expected


def test_a_random_salt_each_time_and_unknown_algorithms_refused() -> None:
    first, second = passwords.hash_password("pw"), passwords.hash_password("pw")
    assert first != second and first.startswith("$5$") and len(first.split("$")[2]) == passwords.SALT_LENGTH
    salt = first.split("$")[2]
    assert passwords.hash_password("pw", "sha256", salt) == first
    with pytest.raises(ValueError, match="unknown password hash algorithm 'md5'"):
        passwords.hash_password("pw", "md5")
