#!/bin/sh
# The seeds' data-path features on dat2-soft: one-shot bind+send and send-with-invalidate.
set -u
inc="-I$DAT2_ROOT/include"
$CC $CFLAGS $inc "$DAT2_ROOT/c-tests/seeds/seeds.c" -L"$DAT2_BUILD" -ldat2 -o "$DAT2_OUT/seeds" || { echo "FAIL seeds:build"; exit 1; }
DAT_OVERRIDE=/nonexistent LD_LIBRARY_PATH="$DAT2_BUILD" timeout 60 "$DAT2_OUT/seeds"
