// Planted violation: a tuple struct named as a secret.
#[derive(Debug, Clone)]
pub struct ApiSecret(pub String);
