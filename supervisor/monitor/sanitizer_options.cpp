// In a sanitizer build (the test build), the monitor runs without
// LeakSanitizer: its exit-time check clones a tracer task that outlives the
// command's exit record, and tests rightly count every leftover process.
// AddressSanitizer's memory checks stay on. Release monitors are static and
// carry no sanitizer at all.
#if defined(__SANITIZE_ADDRESS__)
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }
#endif
