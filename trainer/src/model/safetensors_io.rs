//! Reading and writing weights in Hugging Face's safetensors layout.
//!
//! dfdx's own loader reinterprets bytes as the target dtype without checking the stored dtype
//! (a bf16 checkpoint loaded into f32 panics) and reads only single files, so this module parses
//! the files with the `safetensors` crate, converts f32, bf16, f16 and f64 to f32 itself, and
//! follows `model.safetensors.index.json` for sharded checkpoints. Files are read whole into memory.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use dfdx::prelude::{Device, Dtype, HasShape};
use safetensors::{Dtype as StDtype, SafeTensors, tensor::TensorView};
use serde_json::Value;

use super::config::ModelConfig;
use super::params::{ModelParams, Param, expected_shapes};
use crate::error::{Error, IoOp, Result};

/// File name of a single-file checkpoint.
pub(crate) const SINGLE_FILE: &str = "model.safetensors";
/// File name of a sharded checkpoint's index.
pub(crate) const INDEX_FILE: &str = "model.safetensors.index.json";

/// A host tensor: shape and row-major f32 data.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HostTensor {
    /// Shape, outermost first.
    pub shape: Vec<usize>,
    /// Row-major values.
    pub data: Vec<f32>,
}

/// Loads the model weights from a checkpoint directory holding `model.safetensors` or a sharded
/// `model.safetensors.index.json` with its shards. Tensors not needed by `config` (such as a
/// stored `lm_head.weight` when embeddings are tied) are ignored.
pub(crate) fn load_params<E: Dtype, D: Device<E>>(
    dir: &Path,
    config: &ModelConfig,
    dev: &D,
) -> Result<ModelParams<E, D>> {
    let wanted: BTreeSet<String> = expected_shapes(config)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let mut tensors = BTreeMap::new();
    let index = dir.join(INDEX_FILE);
    if index.exists() {
        for (file, names) in shard_files(&index)? {
            let names: BTreeSet<String> =
                names.into_iter().filter(|n| wanted.contains(n)).collect();
            tensors.extend(read_tensors(&dir.join(&file), Some(&names))?);
        }
    } else {
        tensors = read_tensors(&dir.join(SINGLE_FILE), Some(&wanted))?;
    }
    ModelParams::from_host(config, dev, |name, shape| {
        let t = tensors.remove(name).ok_or_else(|| Error::MissingTensor {
            name: name.to_owned(),
            path: dir.to_path_buf(),
        })?;
        if t.shape != shape {
            return Err(Error::TensorShape {
                name: name.to_owned(),
                expected: shape.to_vec(),
                found: t.shape,
            });
        }
        Ok(t.data
            .into_iter()
            .map(|x| E::from_f32(x).expect("f32 converts"))
            .collect())
    })
}

/// Saves the weights as one f32 `model.safetensors` with Hugging Face names.
pub(crate) fn save_params<E: Dtype, D: Device<E>>(
    params: &ModelParams<E, D>,
    path: &Path,
) -> Result<()> {
    let tensors = params
        .named()
        .into_iter()
        .map(|(name, p)| {
            let (shape, data) = match p {
                Param::Vector(v) => (vec![v.shape().0], v.as_vec()),
                Param::Matrix(m) => (vec![m.shape().0, m.shape().1], m.as_vec()),
            };
            let data = data
                .into_iter()
                .map(|x| x.to_f32().unwrap_or(f32::NAN))
                .collect();
            (name, HostTensor { shape, data })
        })
        .collect();
    write_tensors(&tensors, path)
}

/// The shard files named by an index, each with the tensor names it holds.
fn shard_files(index: &Path) -> Result<BTreeMap<String, Vec<String>>> {
    let text = fs_err::read_to_string(index).map_err(|e| Error::io(IoOp::Read, index, e))?;
    let value: Value = serde_json::from_str(&text).map_err(|source| Error::Json {
        path: index.to_path_buf(),
        source,
    })?;
    let bad = |reason: &str| Error::ShardIndex {
        path: index.to_path_buf(),
        reason: reason.to_owned(),
    };
    let map = value
        .get("weight_map")
        .and_then(Value::as_object)
        .ok_or_else(|| bad("no `weight_map` object"))?;
    let mut files: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, file) in map {
        let file = file
            .as_str()
            .ok_or_else(|| bad(&format!("`{name}` maps to a non-string")))?;
        if file.contains('/') || file.contains('\\') || file.starts_with('.') {
            return Err(bad(&format!("shard `{file}` is not a plain file name")));
        }
        files.entry(file.to_owned()).or_default().push(name.clone());
    }
    Ok(files)
}

/// Reads tensors from one safetensors file as f32, all of them or only `only`.
pub(crate) fn read_tensors(
    path: &Path,
    only: Option<&BTreeSet<String>>,
) -> Result<BTreeMap<String, HostTensor>> {
    let bytes = fs_err::read(path).map_err(|e| Error::io(IoOp::Read, path, e))?;
    let st = SafeTensors::deserialize(&bytes).map_err(|source| Error::Safetensors {
        path: path.to_path_buf(),
        source,
    })?;
    let mut out = BTreeMap::new();
    for (name, view) in st.iter() {
        if only.is_some_and(|set| !set.contains(name)) {
            continue;
        }
        let data = to_f32(name, &view)?;
        out.insert(
            name.to_owned(),
            HostTensor {
                shape: view.shape().to_vec(),
                data,
            },
        );
    }
    Ok(out)
}

/// Writes f32 tensors to one safetensors file with `{"format": "pt"}` metadata, which
/// `transformers` requires.
pub(crate) fn write_tensors(tensors: &BTreeMap<String, HostTensor>, path: &Path) -> Result<()> {
    let bytes: BTreeMap<&String, Vec<u8>> = tensors
        .iter()
        .map(|(name, t)| (name, t.data.iter().flat_map(|x| x.to_le_bytes()).collect()))
        .collect();
    let views = tensors
        .iter()
        .map(|(name, t)| {
            TensorView::new(StDtype::F32, t.shape.clone(), &bytes[name]).map(|v| (name.clone(), v))
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| Error::Safetensors {
            path: path.to_path_buf(),
            source,
        })?;
    let metadata = HashMap::from([("format".to_owned(), "pt".to_owned())]);
    safetensors::serialize_to_file(views, Some(metadata), path).map_err(|source| {
        Error::Safetensors {
            path: path.to_path_buf(),
            source,
        }
    })
}

/// Converts a stored tensor to f32. Little-endian, as safetensors specifies.
fn to_f32(name: &str, view: &TensorView<'_>) -> Result<Vec<f32>> {
    let data = view.data();
    Ok(match view.dtype() {
        StDtype::F32 => data
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        StDtype::BF16 => data
            .chunks_exact(2)
            .map(|b| bf16_to_f32(u16::from_le_bytes([b[0], b[1]])))
            .collect(),
        StDtype::F16 => data
            .chunks_exact(2)
            .map(|b| f16_to_f32(u16::from_le_bytes([b[0], b[1]])))
            .collect(),
        StDtype::F64 => data
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")) as f32)
            .collect(),
        other => {
            return Err(Error::TensorDtype {
                name: name.to_owned(),
                dtype: format!("{other:?}"),
            });
        }
    })
}

/// A bfloat16 is the top half of an f32: shifting its bits left by 16 is exact.
pub(crate) fn bf16_to_f32(bits: u16) -> f32 {
    f32::from_bits(u32::from(bits) << 16)
}

/// IEEE 754 half precision to f32, exact for every value (subnormals, infinities, NaN).
pub(crate) fn f16_to_f32(bits: u16) -> f32 {
    let sign = u32::from(bits >> 15) << 31;
    let exp = u32::from((bits >> 10) & 0x1f);
    let mant = u32::from(bits & 0x3ff);
    let magnitude = match (exp, mant) {
        (0, 0) => 0,
        // Subnormal: mant · 2⁻²⁴, exactly representable in f32.
        (0, _) => (mant as f32 * 2f32.powi(-24)).to_bits(),
        (0x1f, 0) => 0x7f80_0000,
        (0x1f, _) => 0x7fc0_0000 | (mant << 13),
        _ => ((exp + 127 - 15) << 23) | (mant << 13),
    };
    f32::from_bits(sign | magnitude)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_conversions_are_exact() {
        let cases: [(u16, f32, f32); 6] = [
            // (bits, as bf16, as f16)
            (0x0000, 0.0, 0.0),
            (0x3c00, 0.0078125, 1.0),
            (0xc000, -2.0, -2.0),
            (0x3f80, 1.0, 1.875),
            (0x0001, 9.18355e-41, 5.960_464_5e-8),
            (0x7c00, 2.658_456e36, f32::INFINITY),
        ];
        for (bits, bf, f) in cases {
            assert_eq!(bf16_to_f32(bits), bf, "bf16 {bits:#06x}");
            assert_eq!(f16_to_f32(bits), f, "f16 {bits:#06x}");
        }
        assert!(f16_to_f32(0x7e00).is_nan());
    }
}
