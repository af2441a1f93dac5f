#pragma once
// Sanitizer settings built into dtrain's executables: include this in exactly one file of each (the
// main of the dtrain binary, the main of the test programs). The environment (TSAN_OPTIONS) can
// still override them.
//
// ThreadSanitizer: libuv from Debian is not built with it, and closes descriptors with a raw
// close syscall that TSan cannot see; a descriptor number that another thread then reuses (open,
// dup, accept) reads as a race on that descriptor. ignore_noninstrumented_modules keeps TSan from
// checking the libc calls made from inside such libraries (their synchronisation still counts);
// races in dtrain's own code, which is instrumented, are reported as usual.
#if defined(__SANITIZE_THREAD__)
#define DTRAIN_TSAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define DTRAIN_TSAN_BUILD 1
#endif
#endif

#ifdef DTRAIN_TSAN_BUILD
extern "C" const char* __tsan_default_options() { return "ignore_noninstrumented_modules=1"; }
#endif
