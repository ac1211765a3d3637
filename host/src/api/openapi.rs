//! What the OpenAPI document says of every protected route at once,
//! which the per-route annotations would repeat: the answers of the token
//! check and the request guard (`401`, `403`, `415`, `421`), and that an
//! `application/wasm` body is raw bytes (not a JSON array).
//! It only describes what the routes already do; it never changes them.

use utoipa::openapi::path::Operation;
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
use utoipa::openapi::{ContentBuilder, OpenApi, Ref, ResponseBuilder};

/// Complete the document of the routes behind the token.
pub(super) fn describe_protected(document: &mut OpenApi) {
    for item in document.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
            &mut item.options,
            &mut item.head,
            &mut item.trace,
        ];
        for operation in operations.into_iter().flatten() {
            refusals(operation);
            wasm_bytes(operation);
        }
    }
}

/// The answers of the token check and the guard, which no handler gives.
fn refusals(operation: &mut Operation) {
    let has_body = operation.request_body.is_some();
    let responses = &mut operation.responses.responses;
    let mut add = |status: &str, description: &str| {
        let body = ContentBuilder::new().schema(Some(Ref::from_schema_name("ErrorBody"))).build();
        let response =
            ResponseBuilder::new().description(description).content("application/json", body);
        responses.entry(status.to_string()).or_insert(response.build().into());
    };
    add(
        "401",
        "`unauthorized`: no valid `Authorization: Bearer <token>` header (with tokens configured)",
    );
    add("403", "`forbidden`: the token's role may not do this; `foreign_origin`: a state-changing request from a page of another site");
    if has_body {
        add("415", "`unsupported_media_type`: a body that is not JSON, YAML or Wasm");
    }
    add(
        "421",
        "`unknown_host`: a Host that is not an IP address, localhost or an --allow-host name",
    );
}

/// An `application/wasm` body is the module's or component's bytes.
fn wasm_bytes(operation: &mut Operation) {
    let Some(body) = operation.request_body.as_mut() else { return };
    if let Some(content) = body.content.get_mut("application/wasm") {
        let bytes = ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Binary)));
        content.schema = Some(bytes.into());
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_protected_operation_documents_401_and_uploads_are_bytes() {
        let document = serde_json::to_value(super::super::openapi()).unwrap();
        let (mut protected, mut uploads) = (0, 0);
        for (path, item) in document["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap() {
                let open = path == "/healthz" || path == "/readyz";
                let documented = operation["responses"].get("401").is_some();
                assert_eq!(documented, !open, "{method} {path}: 401 documented: {documented}");
                protected += usize::from(!open);
                let wasm = &operation["requestBody"]["content"]["application/wasm"]["schema"];
                if !wasm.is_null() {
                    let schema = (wasm["type"].as_str(), wasm["format"].as_str());
                    assert_eq!(schema, (Some("string"), Some("binary")), "{method} {path}");
                    uploads += 1;
                }
            }
        }
        assert!(protected >= 13, "{protected} protected operations");
        assert_eq!(uploads, 1, "PUT /functions/{{name}} takes Wasm");
        let choice = &document["components"]["schemas"]["VersionChoice"]["oneOf"];
        assert_eq!(choice.as_array().map(Vec::len), Some(2), "a version number or \"latest\"");
    }
}
