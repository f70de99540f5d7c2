// An example for bullet (at feab6443, CPU backend), added by lakefish's test
// tests/tests/bullet.rs to a copy of ../shared/bench/bullet-cpu/bullet. It trains one of
// bullet's four examples/progression nets, with the example's own inputs, graph and
// `save_format` lines but a narrower transformer, for a few steps on a binpack, saves the
// checkpoint (quantised.bin), then prints "eval X", X bullet's own float output (`eval_raw_output`, before
// the eval scale) for each FEN on standard input, one per line.
//
// Environment: NET (1..4), HL (transformer width), DATA (a .binpack), OUT (the output directory),
// STEPS (training steps).
//
// With CMP=1 it trains as ../shared/bench/bullet-cpu's `cmp` example does instead, for
// `lakefish bench train --bullet-buckets`: batches of 16,384, STEPS in four superbatches
// (bullet prints its running loss per superbatch), constant lr 0.001, target
// sigmoid(score / 361) with no game result, lakefish's quiet filter, a 32 MB shuffle
// buffer, THREADS threads (default 2), LR (default 0.001). With BF set (a file of bullet's
// ChessBoard records) it reads that file in order instead of DATA; with INIT (a weights.bin)
// it starts from those weights; STEPS=1 trains one step and saves the checkpoint after it.
//
// With DUMP set (a file of bullet's ChessBoard records) it trains nothing: bullet's own
// DirectSequentialDataLoader reads the file, and for each record it prints one line,
// "pos S R F1 F2 ...": the score and result (0 loss, 1 draw, 2 win, the side to move's) as
// bullet's loader gives them to the trainer, and the side to move's Chess768 features.
use bullet_lib::{
    game::{
        formats::sfbinpack::{
            TrainingDataEntry,
            chess::{r#move::MoveType, piecetype::PieceType},
        },
        inputs::{Chess768, ChessBucketsMirrored, get_num_buckets},
        outputs::MaterialCount,
    },
    nn::{
        InitSettings, Shape,
        optimiser::{AdamW, AdamWParams},
    },
    trainer::{
        save::SavedFormat,
        schedule::{TrainingSchedule, TrainingSteps, lr, wdl},
        settings::LocalSettings,
    },
    value::{
        ValueTrainerBuilder, loader,
        loader::{DataLoader, LoadableDataType},
    },
};
use std::io::BufRead;

#[rustfmt::skip]
const BUCKET_LAYOUT: [usize; 32] = [
    0, 1, 2, 3,
    4, 4, 5, 5,
    6, 6, 6, 6,
    7, 7, 7, 7,
    8, 8, 8, 8,
    8, 8, 8, 8,
    9, 9, 9, 9,
    9, 9, 9, 9,
];
const NUM_INPUT_BUCKETS: usize = get_num_buckets(&BUCKET_LAYOUT);
const NUM_OUTPUT_BUCKETS: usize = 8;

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"))
}

fn cmp() -> bool {
    std::env::var("CMP").is_ok_and(|v| v == "1")
}

fn threads() -> usize {
    std::env::var("THREADS").ok().and_then(|t| t.parse().ok()).unwrap_or(2)
}

fn schedule(steps: usize) -> TrainingSchedule<lr::ConstantLR, wdl::ConstantWDL> {
    if cmp() && steps == 1 {
        // One step, saved after it: for a comparison of single steps from the same weights.
        return TrainingSchedule {
            net_id: "lakefish_cmp".to_string(),
            eval_scale: 361.0,
            steps: TrainingSteps { batch_size: 16_384, batches_per_superbatch: 1, start_superbatch: 1, end_superbatch: 1 },
            wdl_scheduler: wdl::ConstantWDL { value: 0.0 },
            lr_scheduler: lr::ConstantLR { value: std::env::var("LR").ok().and_then(|v| v.parse().ok()).unwrap_or(0.001) },
            save_rate: 1,
        };
    }
    if cmp() {
        assert!(steps % 4 == 0, "STEPS must be a multiple of 4 with CMP=1");
        return TrainingSchedule {
            net_id: "lakefish_cmp".to_string(),
            eval_scale: 361.0,
            steps: TrainingSteps { batch_size: 16_384, batches_per_superbatch: steps / 4, start_superbatch: 1, end_superbatch: 4 },
            wdl_scheduler: wdl::ConstantWDL { value: 0.0 },
            lr_scheduler: lr::ConstantLR { value: std::env::var("LR").ok().and_then(|v| v.parse().ok()).unwrap_or(0.001) },
            save_rate: 1_000_000,
        };
    }
    TrainingSchedule {
        net_id: "lakefish_check".to_string(),
        eval_scale: 400.0,
        steps: TrainingSteps { batch_size: 4096, batches_per_superbatch: steps, start_superbatch: 1, end_superbatch: 1 },
        wdl_scheduler: wdl::ConstantWDL { value: 0.0 },
        lr_scheduler: lr::ConstantLR { value: 0.01 },
        save_rate: 1,
    }
}

fn filter(e: &TrainingDataEntry) -> bool {
    e.score.unsigned_abs() < 32000
}

// lakefish's `quiet` mask, as the `cmp` example has it: a score, not in check, not a capture,
// not a promotion.
fn quiet(entry: &TrainingDataEntry) -> bool {
    let t = entry.mv.mtype();
    entry.score.unsigned_abs() < 32000
        && !entry.pos.is_checked(entry.pos.side_to_move())
        && t != MoveType::Promotion
        && t != MoveType::EnPassant
        && (t == MoveType::Castle || entry.pos.piece_at(entry.mv.to()).piece_type() == PieceType::None)
}

macro_rules! train_and_eval {
    ($trainer:expr, $steps:expr) => {{
        let mut trainer = $trainer;
        if let Ok(init) = std::env::var("INIT") {
            // Start from these weights (bullet's weights.bin layout) instead of bullet's own.
            trainer.optimiser.load_weights_from_file(&init).unwrap();
        }
        let settings = LocalSettings {
            threads: threads(),
            test_set: None,
            output_directory: Box::leak(env("OUT").into_boxed_str()),
            batch_queue_size: if cmp() { 64 } else { 8 },
        };
        let data = std::env::var("DATA").unwrap_or_default();
        let (keep, buffer_mb, loader_threads): (fn(&TrainingDataEntry) -> bool, usize, usize) =
            if cmp() { (quiet, 32, threads()) } else { (filter, 8, 2) };
        match std::env::var("BF") {
            // Records in bullet's own format, read in file order (no shuffle, no filter).
            Ok(bf) => trainer.run(&schedule($steps), &settings, &loader::DirectSequentialDataLoader::new(&[&bf])),
            Err(_) => {
                assert!(!data.is_empty(), "DATA (a .binpack) or BF (bullet records) must be set");
                trainer.run(&schedule($steps), &settings, &loader::SfBinpackLoader::new(&data, buffer_mb, loader_threads, keep))
            }
        }
        for line in std::io::stdin().lock().lines() {
            let fen = line.unwrap();
            if !fen.trim().is_empty() {
                println!("eval {}", trainer.eval_raw_output(fen.trim())[0]);
            }
        }
    }};
}

/// DUMP: every record of the file, as bullet's loader and its Chess768 inputs see it.
fn dump(path: &str) {
    use bullet_lib::game::{formats::bulletformat::ChessBoard, inputs::SparseInputType};
    use std::io::Write;
    let data = loader::DirectSequentialDataLoader::new(&[path]);
    let n = DataLoader::<ChessBoard>::count_positions(&data).unwrap() as usize;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if n == 0 {
        return;
    }
    // The loader loops over its files until told to stop: stop after n records.
    let mut seen = 0;
    data.map_batches(0, 4096, |batch: &[ChessBoard]| {
        for board in batch.iter().take(n - seen) {
            let mut features = Vec::new();
            Chess768.map_features(board, |stm, _| features.push(stm));
            features.sort_unstable();
            let text: Vec<String> = features.iter().map(usize::to_string).collect();
            let result = LoadableDataType::result(board) as u8;
            writeln!(out, "pos {} {result} {}", LoadableDataType::score(board), text.join(" ")).unwrap();
            seen += 1;
        }
        seen >= n
    });
}

fn main() {
    if let Ok(path) = std::env::var("DUMP") {
        return dump(&path);
    }
    let hl: usize = env("HL").parse().unwrap();
    let steps: usize = env("STEPS").parse().unwrap();
    let factorised_l0w = || {
        SavedFormat::id("l0w")
            .transform(|store, weights| {
                let factoriser = store.get("l0f").values.repeat(NUM_INPUT_BUCKETS);
                weights.into_iter().zip(factoriser).map(|(a, b)| a + b).collect()
            })
            .round()
            .quantise::<i16>(255)
    };
    let stricter = AdamWParams { max_weight: 0.99, min_weight: -0.99, ..Default::default() };
    match env("NET").as_str() {
        // examples/progression/1_simple.rs
        "1" => train_and_eval!(
            ValueTrainerBuilder::default()
                .dual_perspective()
                .optimiser(AdamW)
                .inputs(Chess768)
                .use_threads(threads())
                .save_format(&[
                    SavedFormat::id("l0w").round().quantise::<i16>(255),
                    SavedFormat::id("l0b").round().quantise::<i16>(255),
                    SavedFormat::id("l1w").round().quantise::<i16>(64),
                    SavedFormat::id("l1b").round().quantise::<i16>(255 * 64),
                ])
                .loss_fn(|output, target| output.sigmoid().squared_error(target))
                .build(|builder, stm_inputs, ntm_inputs| {
                    let l0 = builder.new_affine("l0", 768, hl);
                    let l1 = builder.new_affine("l1", 2 * hl, 1);
                    let stm_hidden = l0.forward(stm_inputs).screlu();
                    let ntm_hidden = l0.forward(ntm_inputs).screlu();
                    l1.forward(stm_hidden.concat(ntm_hidden))
                }),
            steps
        ),
        // examples/progression/2_output_buckets.rs
        "2" => train_and_eval!(
            ValueTrainerBuilder::default()
                .dual_perspective()
                .optimiser(AdamW)
                .inputs(Chess768)
                .output_buckets(MaterialCount::<NUM_OUTPUT_BUCKETS>)
                .use_threads(threads())
                .save_format(&[
                    SavedFormat::id("l0w").round().quantise::<i16>(255),
                    SavedFormat::id("l0b").round().quantise::<i16>(255),
                    SavedFormat::id("l1w").round().quantise::<i16>(64).transpose(),
                    SavedFormat::id("l1b").round().quantise::<i16>(255 * 64),
                ])
                .loss_fn(|output, target| output.sigmoid().squared_error(target))
                .build(|builder, stm_inputs, ntm_inputs, output_buckets| {
                    let l0 = builder.new_affine("l0", 768, hl);
                    let l1 = builder.new_affine("l1", 2 * hl, NUM_OUTPUT_BUCKETS);
                    let stm_hidden = l0.forward(stm_inputs).screlu();
                    let ntm_hidden = l0.forward(ntm_inputs).screlu();
                    l1.forward(stm_hidden.concat(ntm_hidden)).select(output_buckets)
                }),
            steps
        ),
        // examples/progression/3_input_buckets.rs
        "3" => train_and_eval!(
            {
                let mut trainer = ValueTrainerBuilder::default()
                    .dual_perspective()
                    .optimiser(AdamW)
                    .inputs(ChessBucketsMirrored::new(BUCKET_LAYOUT))
                    .output_buckets(MaterialCount::<NUM_OUTPUT_BUCKETS>)
                    .use_threads(threads())
                    .save_format(&[
                        factorised_l0w(),
                        SavedFormat::id("l0b").round().quantise::<i16>(255),
                        SavedFormat::id("l1w").round().quantise::<i16>(64).transpose(),
                        SavedFormat::id("l1b").round().quantise::<i16>(255 * 64),
                    ])
                    .loss_fn(|output, target| output.sigmoid().squared_error(target))
                    .build(|builder, stm_inputs, ntm_inputs, output_buckets| {
                        let l0f = builder.new_weights("l0f", Shape::new(hl, 768), InitSettings::Zeroed);
                        let expanded_factoriser = l0f.repeat(NUM_INPUT_BUCKETS);
                        let mut l0 = builder.new_affine("l0", 768 * NUM_INPUT_BUCKETS, hl);
                        l0.weights = l0.weights + expanded_factoriser;
                        let l1 = builder.new_affine("l1", 2 * hl, NUM_OUTPUT_BUCKETS);
                        let stm_hidden = l0.forward(stm_inputs).screlu();
                        let ntm_hidden = l0.forward(ntm_inputs).screlu();
                        l1.forward(stm_hidden.concat(ntm_hidden)).select(output_buckets)
                    });
                trainer.optimiser.set_params_for_weight("l0w", stricter);
                trainer.optimiser.set_params_for_weight("l0f", stricter);
                trainer
            },
            steps
        ),
        // examples/progression/4_multi_layer.rs
        "4" => train_and_eval!(
            {
                let l2 = 16;
                let mut trainer = ValueTrainerBuilder::default()
                    .dual_perspective()
                    .optimiser(AdamW)
                    .inputs(ChessBucketsMirrored::new(BUCKET_LAYOUT))
                    .output_buckets(MaterialCount::<NUM_OUTPUT_BUCKETS>)
                    .use_threads(threads())
                    .save_format(&[
                        factorised_l0w(),
                        SavedFormat::id("l0b").round().quantise::<i16>(255),
                        SavedFormat::id("l1w").transpose().round().quantise::<i8>(64),
                        SavedFormat::id("l1b"),
                        SavedFormat::id("l2w").transpose(),
                        SavedFormat::id("l2b"),
                        SavedFormat::id("l3w").transpose(),
                        SavedFormat::id("l3b"),
                    ])
                    .loss_fn(|output, target| output.sigmoid().squared_error(target))
                    .build(|builder, stm_inputs, ntm_inputs, output_buckets| {
                        let l0f = builder.new_weights("l0f", Shape::new(hl, 768), InitSettings::Zeroed);
                        let expanded_factoriser = l0f.repeat(NUM_INPUT_BUCKETS);
                        let mut l0 = builder.new_affine("l0", 768 * NUM_INPUT_BUCKETS, hl);
                        l0.init_with_effective_input_size(32);
                        l0.weights = l0.weights + expanded_factoriser;
                        let l1 = builder.new_affine("l1", hl, NUM_OUTPUT_BUCKETS * l2);
                        let l2 = builder.new_affine("l2", l2, NUM_OUTPUT_BUCKETS * 32);
                        let l3 = builder.new_affine("l3", 32, NUM_OUTPUT_BUCKETS);
                        let stm_hidden = l0.forward(stm_inputs).crelu().pairwise_mul();
                        let ntm_hidden = l0.forward(ntm_inputs).crelu().pairwise_mul();
                        let hl1 = stm_hidden.concat(ntm_hidden);
                        let hl2 = l1.forward(hl1).select(output_buckets).screlu();
                        let hl3 = l2.forward(hl2).select(output_buckets).screlu();
                        l3.forward(hl3).select(output_buckets)
                    });
                trainer.optimiser.set_params_for_weight("l0w", stricter);
                trainer.optimiser.set_params_for_weight("l0f", stricter);
                trainer
            },
            steps
        ),
        other => panic!("NET={other}: 1 to 4"),
    }
}
