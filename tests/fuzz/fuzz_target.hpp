#pragma once
// The one entry point every fuzz target defines (libFuzzer's). Built twice:
// with clang's libFuzzer and sanitizers (scripts/fuzz), and with replay.cpp's
// main, which runs the committed corpus in the ordinary test suite, so every
// input that once crashed stays a regression test without clang.
#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
