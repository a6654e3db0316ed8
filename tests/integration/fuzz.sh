#!/bin/sh
# fuzz.sh - a short pass of every libFuzzer target (the wire decoder, the
# /proc and maps parsers, the HTTP request parameters, the symbolizer
# and the unwinder on ELF files and snapshots): a crash or a leak is a
# failing test. make fuzz runs longer.
exec sh "$(dirname "$0")/../fuzz/run.sh" "$BUILD/fuzz" "${SW_FUZZ_SECONDS:-5}" \
	"$BUILD/fixtures"
