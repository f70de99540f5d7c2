//! The positions codec's parallel encoder writes the same bytes as parquet's plain writer.

use arrow_array::RecordBatch;
use lakefish_ingest::binpack::{decode_chunk, synthetic_binpack};
use lakefish_lake::parts::{
    batch_from_chunks, encode_parquet_on, encode_parquet_with, read_positions, writer_properties,
};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;

fn sequential(batch: &RecordBatch, props: WriterProperties) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut w = ArrowWriter::try_new(&mut buf, batch.schema(), Some(props)).unwrap();
    w.write(batch).unwrap();
    w.close().unwrap();
    buf
}

#[test]
fn parallel_encoding_writes_the_same_bytes_as_the_plain_writer() {
    let bytes = synthetic_binpack(400, 3);
    let size = u32::from_le_bytes(bytes[4..8].try_into().unwrap()) as usize;
    let chunk = decode_chunk(&bytes[8..8 + size], 5, 0).unwrap();
    let batch = batch_from_chunks(&[chunk]);
    assert!(batch.num_rows() > 3000, "{} rows", batch.num_rows());
    for (rows, group_rows) in [(batch.num_rows(), 1000), (999, 1000), (0, 1000), (50, 7)] {
        let batch = batch.slice(0, rows);
        let props = || {
            let mut b = writer_properties().into_builder();
            b = b.set_max_row_group_row_count(Some(group_rows));
            b.build()
        };
        let want = sequential(&batch, props());
        for threads in [1, 2, 5] {
            let got = encode_parquet_with(&batch, "t", threads, props()).unwrap();
            assert!(got == want, "{rows} rows, {threads} threads: bytes differ");
        }
    }
    // And the default settings read back.
    let encoded = encode_parquet_on(&batch, "t", 2).unwrap();
    let rows = read_positions(encoded.into(), "t").unwrap();
    assert_eq!(rows.len(), batch.num_rows());
}
