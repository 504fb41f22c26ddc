//! Typed errors with stable rule names.
//!
//! Constructors in this crate are `const fn`s returning `Result<_, Error>`, so an error has to be
//! plain `Copy` data: the violated [`Rule`], the position it concerns and up to two values. The
//! human message is built by `Display`, which names the rule and says what to change.

use crate::rules::{self, RuleId};
use crate::Index;
use core::fmt;

/// The rule a bad parameter violates. [`Rule::name`] is the stable kebab-case name printed as
/// `error[name]: …` by the `ck` command and used by the macro's diagnostics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// A length (of a dimension, tensor, transform) is zero or negative.
    LengthNotPositive,
    /// A pad amount or stride that must be ≥ 0 is negative.
    NegativeParameter,
    /// Two lists that must have the same length do not.
    ListLengthMismatch,
    /// A list that needs at least one entry is empty.
    EmptyList,
    /// More entries than the fixed capacity (`MAX_DIMS`, hidden dims, transforms).
    CapacityExceeded,
    /// An index (coordinate, access number, id) is outside its range.
    IndexOutOfRange,
    /// The second length of an xor transform is not a power of two.
    XorNotPowerOfTwo,
    /// `slice` bounds are not `0 ≤ begin ≤ end ≤ low_len`.
    SliceOutOfRange,
    /// A product of lengths does not fit below 2^31 (merge/magic division is exact only there).
    IndexOverflow,
    /// A space-filling curve's length is not divisible by its scalars per access.
    SfcNotDivisible,
    /// A space-filling curve's dimension order is not a permutation of `0..n`.
    SfcOrderNotPermutation,
    /// An adaptor's id lists do not match its transform's number of lower/upper dims.
    AdaptorArity,
    /// A hidden dimension is produced (as an upper dim) by two transforms, or consumed (as a
    /// lower dim) by two transforms.
    AdaptorHiddenReused,
    /// A transform reads a hidden dimension that is neither a bottom dim nor produced by an
    /// earlier transform in the list.
    AdaptorOrder,
    /// Top ids (or bottom ids) are not distinct, or a top id is also a lower id.
    AdaptorTopBottom,
    /// A transform's upper dimension of length > 1 is neither a top dim nor read by anyone.
    AdaptorDangling,
    /// The ids given to `transform_tensor_adaptor` do not consume every old top dim exactly once
    /// or do not name every new top dim exactly once.
    AdaptorIdsNotPermutation,
    /// `chain_tensor_adaptors(a0, a1)` with `a0.ntop != a1.nbottom`.
    ChainMismatch,
    /// A descriptor must have exactly one bottom dimension.
    DescriptorBottom,
    /// An LDS layout's K per block is not a multiple of its K pack.
    LdsKPack,
    /// An LDS layout's M per block is not a multiple of its MLdsLayer.
    LdsLayer,
    /// A swizzle whose source and target bits overlap, or reach past bit 31.
    SwizzleBits,
}

impl Rule {
    /// The rule's identifier in the one vocabulary ([`crate::rules`]).
    pub const fn id(self) -> RuleId {
        match self {
            Rule::LengthNotPositive => rules::LENGTH_NOT_POSITIVE,
            Rule::NegativeParameter => rules::NEGATIVE_PARAMETER,
            Rule::ListLengthMismatch => rules::LIST_LENGTH_MISMATCH,
            Rule::EmptyList => rules::EMPTY_LIST,
            Rule::CapacityExceeded => rules::CAPACITY_EXCEEDED,
            Rule::IndexOutOfRange => rules::INDEX_OUT_OF_RANGE,
            Rule::XorNotPowerOfTwo => rules::XOR_NOT_POWER_OF_TWO,
            Rule::SliceOutOfRange => rules::SLICE_OUT_OF_RANGE,
            Rule::IndexOverflow => rules::INDEX_OVERFLOW,
            Rule::SfcNotDivisible => rules::SFC_NOT_DIVISIBLE,
            Rule::SfcOrderNotPermutation => rules::SFC_ORDER_NOT_PERMUTATION,
            Rule::AdaptorArity => rules::ADAPTOR_ARITY,
            Rule::AdaptorHiddenReused => rules::ADAPTOR_HIDDEN_REUSED,
            Rule::AdaptorOrder => rules::ADAPTOR_ORDER,
            Rule::AdaptorTopBottom => rules::ADAPTOR_TOP_BOTTOM,
            Rule::AdaptorDangling => rules::ADAPTOR_DANGLING,
            Rule::AdaptorIdsNotPermutation => rules::ADAPTOR_IDS_NOT_PERMUTATION,
            Rule::ChainMismatch => rules::CHAIN_MISMATCH,
            Rule::DescriptorBottom => rules::DESCRIPTOR_BOTTOM,
            Rule::LdsKPack => rules::LDS_K_PACK,
            Rule::LdsLayer => rules::LDS_MLDS_LAYER,
            Rule::SwizzleBits => rules::SWIZZLE_BITS,
        }
    }

    /// The stable kebab-case name.
    pub const fn name(self) -> &'static str {
        self.id().name()
    }
}

/// A violated rule, where, and the offending values.
///
/// `what` names the parameter (`"lengths"`, `"xor lengths"`, `"transform 2 lower ids"`, …),
/// `at` the position inside it, `values` up to two numbers the message quotes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Error {
    /// The violated rule.
    pub rule: Rule,
    /// The parameter concerned.
    pub what: &'static str,
    /// Position inside `what`, if it is a list.
    pub at: Option<usize>,
    /// Up to two values the message quotes (meaning depends on the rule).
    pub values: [Index; 2],
}

impl Error {
    /// An error about parameter `what`.
    pub const fn new(rule: Rule, what: &'static str) -> Error {
        Error {
            rule,
            what,
            at: None,
            values: [0, 0],
        }
    }

    /// The same error, located at position `at` of its parameter.
    pub const fn at(mut self, at: usize) -> Error {
        self.at = Some(at);
        self
    }

    /// The same error, quoting `a` and `b`.
    pub const fn values(mut self, a: Index, b: Index) -> Error {
        self.values = [a, b];
        self
    }
}

struct Where<'a>(&'a Error);

impl fmt::Display for Where<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.at {
            Some(i) => write!(f, "{}[{}]", self.0.what, i),
            None => write!(f, "{}", self.0.what),
        }
    }
}

impl fmt::Display for Error {
    /// `error[rule-name]` is left to the caller; this writes the message after the colon.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w = Where(self);
        let [a, b] = self.values;
        match self.rule {
            Rule::LengthNotPositive => {
                write!(
                    f,
                    "{w} = {a} is not positive; every length must be at least 1"
                )
            }
            Rule::NegativeParameter => write!(f, "{w} = {a} is negative; it must be 0 or more"),
            Rule::ListLengthMismatch => write!(
                f,
                "{w} has {a} entries but {b} are expected; give one entry per dimension"
            ),
            Rule::EmptyList => write!(f, "{w} is empty; give at least one entry"),
            Rule::CapacityExceeded => write!(
                f,
                "{w} needs {a} entries but at most {b} are supported; use fewer dimensions"
            ),
            Rule::IndexOutOfRange => {
                write!(f, "{w} = {a} is out of range; it must be in 0..{b}")
            }
            Rule::XorNotPowerOfTwo => write!(
                f,
                "{w}: second length {a} is not a power of two, so `u1 ^ (u0 % {a})` can leave \
                 0..{a}; use a power of two"
            ),
            Rule::SliceOutOfRange => write!(
                f,
                "{w}: slice [{a}, {b}) is not inside the lower length; need 0 <= begin <= end <= \
                 length"
            ),
            Rule::IndexOverflow => write!(
                f,
                "{w}: the product of lengths reaches {a}, which does not fit below 2^31; use \
                 smaller lengths"
            ),
            Rule::SfcNotDivisible => write!(
                f,
                "{w}: length {a} is not divisible by its scalars per access {b}; choose a \
                 scalars-per-access value that divides the length"
            ),
            Rule::SfcOrderNotPermutation => write!(
                f,
                "{w} is not a permutation of 0..{a}; list every dimension exactly once"
            ),
            Rule::AdaptorArity => write!(
                f,
                "{w} lists {a} hidden ids but the transform has {b} dimensions there"
            ),
            Rule::AdaptorHiddenReused => write!(
                f,
                "{w}: hidden dimension {a} is already used by transform {b}; each hidden \
                 dimension is produced once and consumed once"
            ),
            Rule::AdaptorOrder => write!(
                f,
                "{w}: hidden dimension {a} is read before any transform produces it; list \
                 transforms from bottom to top"
            ),
            Rule::AdaptorTopBottom => write!(
                f,
                "{w}: hidden dimension {a} appears twice among top/bottom dims or is both a top \
                 dim and a lower dim"
            ),
            Rule::AdaptorDangling => write!(
                f,
                "{w}: hidden dimension {a} (length {b}) is produced but neither a top dim nor \
                 read by any transform; it would always read as 0"
            ),
            Rule::AdaptorIdsNotPermutation => write!(
                f,
                "{w} is not a permutation of 0..{a}; every dimension must be named exactly once"
            ),
            Rule::ChainMismatch => write!(
                f,
                "{w}: the first adaptor has {a} top dims but the second has {b} bottom dims"
            ),
            Rule::LdsKPack => write!(
                f,
                "{w}: K per block {a} is not a multiple of the K pack {b}; choose a K pack that divides it"
            ),
            Rule::LdsLayer => write!(
                f,
                "{w}: M per block {a} is not a multiple of MLdsLayer {b}; choose an MLdsLayer that divides it"
            ),
            Rule::SwizzleBits => write!(
                f,
                "{w}: {a} bits shifted by {b} overlap themselves or reach past bit 31; use a shift of at least the bit count, and bits + base + shift ≤ 31"
            ),
            Rule::DescriptorBottom => write!(
                f,
                "{w}: a descriptor needs exactly one bottom dimension, found {a}"
            ),
        }
    }
}

#[cfg(all(feature = "std", not(target_arch = "nvptx64")))]
impl std::error::Error for Error {}
