//! The clients' calls, written once for both twins.
//!
//! The blocking [`crate::Delayer`] and the async [`crate::aio::Delayer`]
//! differ only in how they send: each call builds the same operation
//! without I/O ([`crate::ops`], [`crate::wait`], [`crate::inspect`]) and
//! hands it to its client's loop (`run`). So each call is written once, as
//! its docs, its signature and the operation it runs, and [`twins!`] makes
//! the blocking method, which runs it, and the async one, which awaits it
//! (as redis-py writes each command once for its sync and async clients).

/// Each call of the list as a method of both clients:
///
/// ```text
/// /// The blocking method's docs.
/// #[aio]
/// /// The async method's docs.
/// pub fn name(&self, arg: Type, ...) -> Result<T> = <a Result<Op<T>>>;
/// ```
macro_rules! twins {
    ($(
        $(#[doc = $doc:literal])*
        #[aio]
        $(#[doc = $aio:literal])*
        $vis:vis fn $name:ident $(<$lt:lifetime>)? (&$self:ident $(, $arg:ident: $ty:ty)* $(,)?)
            -> Result<$out:ty> = $op:expr;
    )*) => {
        impl crate::Delayer {
            $(
                $(#[doc = $doc])*
                $vis fn $name $(<$lt>)? (&$self $(, $arg: $ty)*) -> crate::Result<$out> {
                    $self.run($op)
                }
            )*
        }

        #[cfg(feature = "aio")]
        impl crate::aio::Delayer {
            $(
                $(#[doc = $aio])*
                $vis async fn $name $(<$lt>)? (&$self $(, $arg: $ty)*) -> crate::Result<$out> {
                    $self.run($op).await
                }
            )*
        }
    };
}
