"""Manifests edited on purpose by tests (as a newer structcal or an attacker would write
them): their own checksum recomputed, so that the checks behind it are what is tested."""

from structcal.io import manifest_digest


def resigned(manifest: dict) -> dict:
    m = dict(manifest)
    if "manifest_sha256" in m:
        m["manifest_sha256"] = manifest_digest(m)
    return m
