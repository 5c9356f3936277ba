//! Builder-style setters for configuration structs that are `#[non_exhaustive]` (so that a
//! field added later breaks no caller): a caller outside the defining crate builds one from
//! `Default` with setters named after the fields (which stay public for reading). Used here
//! for [`QpCaps`](crate::QpCaps) and [`ListenOptions`](crate::ListenOptions), and by
//! `negotiate` for its configurations.

/// `setters!(Type { field: FieldType, ... })`: a `field(self, value) -> Self` for each.
#[doc(hidden)]
#[macro_export]
macro_rules! setters {
    ($ty:ident { $($field:ident: $t:ty),* $(,)? }) => {
        impl $ty {
            $(
                #[doc = concat!("Sets `", stringify!($field), "` (see the field), builder style.")]
                #[must_use]
                pub fn $field(mut self, value: $t) -> Self {
                    self.$field = value;
                    self
                }
            )*
        }
    };
}
