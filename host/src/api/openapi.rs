//! What the OpenAPI document says of every protected route at once,
//! which the per-route annotations would repeat: the token's `401` answer,
//! and that an `application/wasm` body is raw bytes (not a JSON array).
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
            unauthorized(operation);
            wasm_bytes(operation);
        }
    }
}

/// The `401` every protected route answers without the token.
fn unauthorized(operation: &mut Operation) {
    let body = ContentBuilder::new().schema(Some(Ref::from_schema_name("ErrorBody"))).build();
    let response = ResponseBuilder::new()
        .description("No valid `Authorization: Bearer <token>` header (with a token configured)")
        .content("application/json", body)
        .build();
    operation.responses.responses.entry("401".to_string()).or_insert(response.into());
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
                let open = path == "/healthz";
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
