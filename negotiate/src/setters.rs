//! Builder-style setters for the configuration structs ([`ClientConfig`](crate::client::ClientConfig),
//! [`ServerConfig`](crate::server::ServerConfig), [`RequesterConfig`](crate::requester::RequesterConfig),
//! [`ResponderConfig`](crate::responder::ResponderConfig), [`ServerLimits`](crate::limits::ServerLimits)):
//! they are `#[non_exhaustive]`, so that a field added later breaks no caller, and a caller
//! outside this crate builds one from `Default` with these setters, each named after the field
//! it sets (the fields stay public for reading). `rpcrdma_verbs::setters!` makes one per field; this
//! module adds the shortcuts to a nested configuration's fields.

/// `nested_setters!(Type, inner { field: FieldType, ... })`: a `field(self, value) -> Self`
/// that sets `inner.field`, for the fields callers set most often.
macro_rules! nested_setters {
    ($ty:ident, $inner:ident { $($field:ident: $t:ty),* $(,)? }) => {
        impl $ty {
            $(
                #[doc = concat!("Sets `", stringify!($inner), ".", stringify!($field), "`, builder style.")]
                #[must_use]
                pub fn $field(mut self, value: $t) -> Self {
                    self.$inner.$field = value;
                    self
                }
            )*
        }
    };
}
