//! The `#[weir_sdk::function]` attribute.
//!
//! It leaves the marked `impl` block as it is and, when compiling for
//! `wasm32`, adds a hidden module that generates the component bindings
//! for the trait's world and exports the type through them. It never
//! changes the user's code and generates nothing on native targets.

use proc_macro::TokenStream;
use proc_macro2::Span;
use quote::quote;
use syn::{parse_macro_input, spanned::Spanned, ItemImpl, Type};

/// The WIT package, embedded so generated bindings never depend on paths.
const WIT: &str = include_str!(concat!(env!("OUT_DIR"), "/weir.wit"));

/// The interfaces a world imports whose bindings the SDK already has.
const SHARED_IMPORTS: [&str; 5] = ["types", "context", "state", "timers", "broadcast"];

/// Which WIT world a supported trait corresponds to.
struct Role {
    world: &'static str,
    imports: &'static [&'static str],
    module: &'static str,
}

fn role_of(trait_name: &str) -> Option<Role> {
    match trait_name {
        "KeyFunction" => Some(Role {
            world: "key-function",
            imports: &SHARED_IMPORTS[..2],
            module: "__weir_export_key_fn",
        }),
        "ProcessFunction" => Some(Role {
            world: "process-function",
            imports: &SHARED_IMPORTS[..4],
            module: "__weir_export_process_fn",
        }),
        "CoProcessFunction" => Some(Role {
            world: "co-process-function",
            imports: &SHARED_IMPORTS[..4],
            module: "__weir_export_co_process_fn",
        }),
        "BroadcastProcessFunction" => Some(Role {
            world: "broadcast-process-function",
            imports: &SHARED_IMPORTS,
            module: "__weir_export_broadcast_process_fn",
        }),
        "TransformFunction" => Some(Role {
            world: "transform-function",
            imports: &SHARED_IMPORTS[..2],
            module: "__weir_export_transform_fn",
        }),
        "WindowProcessFunction" => Some(Role {
            world: "window-process-function",
            imports: &SHARED_IMPORTS[..2],
            module: "__weir_export_window_process_fn",
        }),
        "AggregateFunction" => Some(Role {
            world: "aggregate-function",
            imports: &SHARED_IMPORTS[..2],
            module: "__weir_export_aggregate_fn",
        }),
        _ => None,
    }
}

/// Marks `impl KeyFunction for T`, `impl ProcessFunction for T` (or another
/// Weir function trait's impl) as the component's implementation of that
/// interface. See `weir_sdk`.
#[proc_macro_attribute]
pub fn function(args: TokenStream, input: TokenStream) -> TokenStream {
    if !args.is_empty() {
        let args = proc_macro2::TokenStream::from(args);
        return syn::Error::new(args.span(), "#[weir_sdk::function] takes no arguments")
            .to_compile_error()
            .into();
    }
    let item = parse_macro_input!(input as ItemImpl);
    match expand(&item) {
        Ok(glue) => quote!(#item #glue).into(),
        Err(error) => {
            let error = error.to_compile_error();
            quote!(#item #error).into()
        }
    }
}

fn expand(item: &ItemImpl) -> syn::Result<proc_macro2::TokenStream> {
    let Some((_, trait_path, _)) = &item.trait_ else {
        return Err(syn::Error::new(item.self_ty.span(), "#[weir_sdk::function] goes on `impl KeyFunction for T`, `impl ProcessFunction for T` or another Weir function trait's impl"));
    };
    let trait_ident = trait_path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default();
    let role = role_of(&trait_ident).ok_or_else(|| {
        syn::Error::new(trait_path.span(), format!("`{trait_ident}` is not a Weir function trait: use `KeyFunction`, `ProcessFunction`, `TransformFunction`, `CoProcessFunction`, `BroadcastProcessFunction`, `AggregateFunction` or `WindowProcessFunction`"))
    })?;
    if !item.generics.params.is_empty() {
        return Err(syn::Error::new(
            item.generics.span(),
            "a Weir function type cannot be generic",
        ));
    }
    let self_ty = outer_type(&item.self_ty)?;
    let module = syn::Ident::new(role.module, Span::call_site());
    let world = format!("weir:function/{}", role.world);
    let with = role.imports.iter().map(|name| {
        let key = format!("weir:function/{name}@0.2.0");
        let ident = syn::Ident::new(name, Span::call_site());
        quote!(#key: weir_sdk::__private::wit::#ident,)
    });
    let export_impl = match role.world {
        "key-function" => quote! {
            impl exports::weir::function::key_fn::Guest for Export {
                fn extract_keys(events: weir_sdk::__private::wit::types::EventBatch)
                    -> ::std::result::Result<weir_sdk::__private::wit::types::PackedKeys, weir_sdk::__private::wit::types::FunctionError> {
                    with_instance(|f| weir_sdk::__private::extract_packed_keys(f, events))
                }
            }
        },
        "window-process-function" => quote! {
            impl exports::weir::function::window_process_fn::Guest for Export {
                fn process_windows(batch: ::std::vec::Vec<weir_sdk::__private::wit::types::WindowEvents>)
                    -> ::std::result::Result<::std::vec::Vec<weir_sdk::Event>, weir_sdk::__private::wit::types::FunctionError> {
                    with_instance(|f| weir_sdk::__private::window_process(f, batch))
                }
            }
        },
        "aggregate-function" => quote! {
            impl exports::weir::function::aggregate_fn::Guest for Export {
                fn add(batch: weir_sdk::__private::wit::types::AccumulateBatch)
                    -> ::std::result::Result<weir_sdk::__private::wit::types::ValueCells, weir_sdk::__private::wit::types::FunctionError> {
                    with_instance(|f| weir_sdk::__private::aggregate_add_packed(f, batch))
                }

                fn merge(a: ::std::vec::Vec<u8>, b: ::std::vec::Vec<u8>)
                    -> ::std::result::Result<::std::vec::Vec<u8>, weir_sdk::__private::wit::types::FunctionError> {
                    with_instance(|f| weir_sdk::__private::aggregate_merge(f, a, b))
                }

                fn results(batch: weir_sdk::__private::wit::types::WindowResults)
                    -> ::std::result::Result<weir_sdk::__private::wit::types::EventBatch, weir_sdk::__private::wit::types::FunctionError> {
                    with_instance(|f| weir_sdk::__private::aggregate_results(f, batch))
                }
            }
        },
        "transform-function" => quote! {
            impl exports::weir::function::transform_fn::Guest for Export {
                fn transform(events: weir_sdk::__private::wit::types::EventBatch)
                    -> ::std::result::Result<weir_sdk::__private::wit::types::EventBatch, weir_sdk::__private::wit::types::FunctionError> {
                    with_instance(|f| weir_sdk::__private::transform_packed(f, events))
                }
            }
        },
        "co-process-function" => quote! {
            impl exports::weir::function::co_process_fn::Guest for Export {
                fn process1(batch: weir_sdk::__private::wit::types::KeyedBatch)
                    -> ::std::result::Result<(), weir_sdk::__private::wit::types::FunctionError> {
                    with_instance(|f| weir_sdk::__private::co_process_packed(f, 0, batch))
                }

                fn process2(batch: weir_sdk::__private::wit::types::KeyedBatch)
                    -> ::std::result::Result<(), weir_sdk::__private::wit::types::FunctionError> {
                    with_instance(|f| weir_sdk::__private::co_process_packed(f, 1, batch))
                }

                fn on_timers(batch: ::std::vec::Vec<weir_sdk::__private::wit::types::KeyedTimers>)
                    -> ::std::result::Result<(), weir_sdk::__private::wit::types::FunctionError> {
                    with_instance(|f| weir_sdk::__private::co_fire_timers(f, batch))
                }
            }
        },
        "broadcast-process-function" => quote! {
            impl exports::weir::function::process_fn::Guest for Export {
                fn process(batch: weir_sdk::__private::wit::types::KeyedBatch)
                    -> ::std::result::Result<(), weir_sdk::__private::wit::types::FunctionError> {
                    with_instance(|f| weir_sdk::__private::process_packed(f, batch))
                }

                fn on_timers(batch: ::std::vec::Vec<weir_sdk::__private::wit::types::KeyedTimers>)
                    -> ::std::result::Result<(), weir_sdk::__private::wit::types::FunctionError> {
                    with_instance(|f| weir_sdk::__private::fire_timers(f, batch))
                }
            }

            impl exports::weir::function::broadcast_fn::Guest for Export {
                fn process_broadcast(events: weir_sdk::__private::wit::types::EventBatch)
                    -> ::std::result::Result<(), weir_sdk::__private::wit::types::FunctionError> {
                    with_instance(|f| weir_sdk::__private::broadcast_packed(f, events))
                }
            }
        },
        _ => quote! {
            impl exports::weir::function::process_fn::Guest for Export {
                fn process(batch: weir_sdk::__private::wit::types::KeyedBatch)
                    -> ::std::result::Result<(), weir_sdk::__private::wit::types::FunctionError> {
                    with_instance(|f| weir_sdk::__private::process_packed(f, batch))
                }

                fn on_timers(batch: ::std::vec::Vec<weir_sdk::__private::wit::types::KeyedTimers>)
                    -> ::std::result::Result<(), weir_sdk::__private::wit::types::FunctionError> {
                    with_instance(|f| weir_sdk::__private::fire_timers(f, batch))
                }
            }
        },
    };
    Ok(quote! {
        #[cfg(target_arch = "wasm32")]
        #[doc(hidden)]
        #[allow(missing_docs, unsafe_code, clippy::all)]
        mod #module {
            weir_sdk::__private::wit_bindgen::generate!({
                inline: #WIT,
                world: #world,
                with: { #(#with)* },
                runtime_path: "weir_sdk::__private::wit_bindgen::rt",
            });

            struct Export;

            ::std::thread_local! {
                static INSTANCE: ::std::cell::RefCell<::std::option::Option<#self_ty>> =
                    const { ::std::cell::RefCell::new(::std::option::Option::None) };
            }

            /// Run `f` on the component's one instance, creating it on first use.
            fn with_instance<R>(f: impl FnOnce(&mut #self_ty) -> R) -> R {
                INSTANCE.with(|cell| {
                    let mut slot = cell.borrow_mut();
                    f(slot.get_or_insert_with(|| {
                        weir_sdk::__private::report_panics();
                        ::std::default::Default::default()
                    }))
                })
            }

            #export_impl

            export!(Export);
        }
    })
}

/// `ty` as seen from the generated child module.
fn outer_type(ty: &Type) -> syn::Result<proc_macro2::TokenStream> {
    match ty {
        Type::Path(path) if path.qself.is_none() => {
            let first = path.path.segments.first().map(|s| s.ident.to_string()).unwrap_or_default();
            if path.path.leading_colon.is_some() || first == "crate" {
                Ok(quote!(#path))
            } else {
                Ok(quote!(super::#path))
            }
        }
        other => Err(syn::Error::new(
            other.span(),
            "#[weir_sdk::function] needs a named type, like `impl KeyFunction for MyFunction`",
        )),
    }
}
