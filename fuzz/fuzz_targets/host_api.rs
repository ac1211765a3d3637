//! Arbitrary call sequences against the host side of the WIT interfaces.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| weir_host::runtime::fuzz::host_api_calls(data));
