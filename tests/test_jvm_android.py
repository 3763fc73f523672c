"""The JVM client against Android's own API, offline (clients/jvm/android-check.sh):

- the main sources and protoc's lite output compile against Android 6.0's platform jar
  (``android-23.jar``, ``core-lambda-stubs.jar`` on the boot classpath) with no error: any JDK API
  newer than API 23 (``Long.compareUnsigned``, ``java.util.Base64``, ``java.nio.file``) would fail it;
- AOSP's ``dx`` dexes the lite jar (client + protobuf runtime) at ``--min-sdk-version=26`` with no
  error (``dx`` does not desugar lambdas; D8 does, for lower API levels).
- ``fedgc.supernode.Unsigned``, the client's own unsigned-long helpers that replace the API-26 ones, equals
  the JDK's ``Long.compareUnsigned``/``toUnsignedString``/``parseUnsignedLong``.

The Android files are ``$FEDGC_SHARED_DIR/android`` (default ``../shared`` beside the repository);
without them the Android checks skip, saying so.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from .conftest import REPO, shared_dir
from .test_jvm_client import JAR, TESTS_JAR, jar  # noqa: F401  (the fixture: make jvm, or skip)

pytestmark = pytest.mark.jvm

ANDROID = shared_dir() / "android"
NEEDED = ("android-23.jar", "core-lambda-stubs.jar", "dx-10.0.0.jar")


def test_unsigned_helpers_equal_the_jdks(jar):  # noqa: F811
    result = subprocess.run(["java", "-cp", f"{JAR}{os.pathsep}{TESTS_JAR}", "fedgc.cli.check.UnsignedCheck"],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0 and result.stdout.startswith("unsigned ok"), result.stdout + result.stderr


def test_main_sources_compile_against_android_23_and_dex_at_api_26(jar):  # noqa: F811
    missing = [name for name in NEEDED if not (ANDROID / name).is_file()]
    if missing:
        pytest.skip(f"Android platform jar / dx not found under {ANDROID} ({', '.join(missing)} missing; "
                    "set FEDGC_SHARED_DIR to the shared folder holding android/; no fetch command gets them: "
                    "they are Debian bullseye's libandroid-23-java and dalvik-exchange jars and a stubs jar, "
                    "android/PROVENANCE.md)")
    result = subprocess.run(["bash", str(REPO / "clients" / "jvm" / "android-check.sh")],
                            env={**os.environ, "FEDGC_SHARED_DIR": str(shared_dir())},
                            capture_output=True, text=True, timeout=400, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("android-23 javac: 0 errors"), result.stdout
    assert lines[1].startswith("dx --min-sdk-version=26: 0 errors"), result.stdout
    assert (REPO / "clients" / "jvm" / "build" / "fedgc-client-lite.dex").stat().st_size > 100_000
