//! Arbitrary call sequences against the host side of the WIT interfaces
//! (`weir_host::runtime::host`), through the driver that weir-host's `fuzz`
//! feature compiles in.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| weir_host::runtime::fuzz::host_api_calls(data));
