#!/usr/bin/env bash
# Checks the client against Android itself, offline (run by tests/test_jvm_android.py; needs `make jvm`
# first, for build/gen-lite and build/fedgc-client-lite.jar):
#  1. javac of the main sources and protoc's lite output against Android 6.0's platform jar (API 23,
#     with core-lambda-stubs.jar on the boot classpath) instead of the JDK: any API newer than 23
#     (Long.compareUnsigned, java.util.Base64, java.nio.file, ...) is a compile error;
#  2. AOSP's dx dexes build/fedgc-client-lite.jar (client + protobuf runtime) at --min-sdk-version 26:
#     dx rejects what Android's runtime cannot load (it does not desugar: lambdas need 26; the Android
#     Gradle plugin's D8 desugars them for lower API levels).
# The Android files come from SHARED/android (SHARED: $FEDGC_SHARED_DIR, default ../shared beside the
# repository; see its PROVENANCE.md). Exit 3 with one line when they are missing.
set -euo pipefail
cd "$(dirname "$0")"
SHARED="${FEDGC_SHARED_DIR:-$(cd ../../.. && pwd)/shared}"
ANDROID="$SHARED/android"
PROTOBUF_JAR="${PROTOBUF_JAR:-/usr/share/java/protobuf.jar}"
MIN_SDK="${MIN_SDK:-26}"
for f in android-23.jar core-lambda-stubs.jar dx-10.0.0.jar; do
    if [ ! -f "$ANDROID/$f" ]; then
        echo "missing: $ANDROID/$f (set FEDGC_SHARED_DIR to the folder holding android/)" >&2
        exit 3
    fi
done
[ -d build/gen-lite ] && [ -f build/fedgc-client-lite.jar ] || { echo "error: run make jvm first" >&2; exit 2; }

rm -rf build/classes-android && mkdir -p build/classes-android
set +e
javac -source 8 -target 8 -nowarn -Xmaxerrs 1000 -encoding UTF-8 \
    -bootclasspath "$ANDROID/android-23.jar:$ANDROID/core-lambda-stubs.jar" -cp "$PROTOBUF_JAR" \
    -d build/classes-android $(find build/gen-lite src/main/java -name '*.java' | sort) > build/android-javac.log 2>&1
javac_rc=$?
set -e
errors=$(grep -c ': error: ' build/android-javac.log || true)
if [ "$javac_rc" -ne 0 ]; then
    grep -A2 ': error: ' build/android-javac.log | head -60 >&2
    echo "android-23 javac: $errors errors" 
    exit 1
fi
echo "android-23 javac: 0 errors ($(find src/main/java -name '*.java' | wc -l) main sources + protoc lite output)"

rm -f build/fedgc-client-lite.dex
set +e
java -cp "$ANDROID/dx-10.0.0.jar" com.android.dx.command.Main --dex --min-sdk-version="$MIN_SDK" \
    --output=build/fedgc-client-lite.dex build/fedgc-client-lite.jar > build/android-dx.log 2>&1
dx_rc=$?
set -e
if [ "$dx_rc" -ne 0 ]; then
    head -20 build/android-dx.log >&2
    echo "dx --min-sdk-version=$MIN_SDK: failed (exit $dx_rc)"
    exit 1
fi
echo "dx --min-sdk-version=$MIN_SDK: 0 errors, build/fedgc-client-lite.dex $(wc -c < build/fedgc-client-lite.dex) bytes"
