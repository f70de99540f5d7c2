//! Opening books for matches: EPD (one position per line) or PGN (each game's final
//! position after its main line). Every line or game that cannot be read is an error naming
//! where (line, game, ply), never quoting the file: a book may come from anywhere, and its
//! errors reach API callers. A book must hold at least one position.
//!
//! This reader is strict where pgn-reader (used by the PGN ingest) is lenient: a token that is
//! not a move is an error here, not skipped, because a book with a silently dropped move
//! would play other openings than its author meant.

use shakmaty::fen::Fen;
use shakmaty::san::SanPlus;
use shakmaty::{CastlingMode, Chess, EnPassantMode, Position};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BookError {
    #[error("book {book}: line {line}: {reason}")]
    Line {
        book: String,
        line: usize,
        reason: String,
    },
    #[error("book {book}: game {game}: {reason}")]
    Game {
        book: String,
        game: usize,
        reason: String,
    },
    #[error("book {0} has no positions")]
    Empty(String),
    #[error("book {0} is not UTF-8 text")]
    NotText(String),
}

/// Opening positions, in file order.
#[derive(Debug, Clone)]
pub struct Book {
    pub positions: Vec<Chess>,
}

impl Book {
    /// Parses `bytes`, named `name` in errors; PGN when the name ends in `.pgn` or the text
    /// starts with a tag, EPD otherwise.
    pub fn parse(name: &str, bytes: &[u8]) -> Result<Book, BookError> {
        let text = std::str::from_utf8(bytes).map_err(|_| BookError::NotText(name.into()))?;
        let text = text.trim_start_matches('\u{feff}');
        let positions = if name.ends_with(".pgn") || text.trim_start().starts_with('[') {
            parse_pgn(name, text)?
        } else {
            parse_epd(name, text)?
        };
        if positions.is_empty() {
            return Err(BookError::Empty(name.into()));
        }
        Ok(Book { positions })
    }

    /// The positions as FEN lines (how a test stores the book it was started with).
    pub fn to_epd(&self) -> String {
        self.positions
            .iter()
            .map(|p| format!("{}\n", Fen::from_position(p, EnPassantMode::Legal)))
            .collect()
    }
}

fn parse_epd(name: &str, text: &str) -> Result<Vec<Chess>, BookError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let err = |reason: String| BookError::Line {
            book: name.into(),
            line: i + 1,
            reason,
        };
        // EPD: four fields then operations; FEN: six fields.
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 4 {
            return Err(err("fewer than four FEN fields".into()));
        }
        let clocks = fields.len() >= 6
            && fields[4].parse::<u32>().is_ok()
            && fields[5].parse::<u32>().is_ok();
        let fen = if clocks {
            fields[..6].join(" ")
        } else {
            format!("{} 0 1", fields[..4].join(" "))
        };
        let parsed: Fen = fen.parse().map_err(|e| err(format!("not a FEN: {e}")))?;
        let pos: Chess = parsed
            .into_position(CastlingMode::Standard)
            .map_err(|e| err(format!("illegal position: {e}")))?;
        if pos.is_game_over() {
            return Err(err("the position is already decided".into()));
        }
        out.push(pos);
    }
    Ok(out)
}

/// A position with the moves that solve it (EPD `bm`), for puzzle accuracy.
#[derive(Debug, Clone)]
pub struct Puzzle {
    pub position: Chess,
    pub best: Vec<shakmaty::Move>,
}

/// Puzzles from EPD lines `FEN bm SAN [SAN...]; id "...";`: every line needs a `bm` whose
/// moves are legal in its position; an error names the file and line.
pub fn parse_puzzles(name: &str, bytes: &[u8]) -> Result<Vec<Puzzle>, BookError> {
    let text = std::str::from_utf8(bytes).map_err(|_| BookError::NotText(name.into()))?;
    let mut out = Vec::new();
    for (i, line) in text.trim_start_matches('\u{feff}').lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let err = |reason: String| BookError::Line {
            book: name.into(),
            line: i + 1,
            reason,
        };
        // Four FEN fields (any spacing), two move counters when a FEN gives them, then the
        // operations.
        let mut fields: Vec<&str> = Vec::with_capacity(4);
        let mut rest = line;
        while fields.len() < 4 {
            rest = rest.trim_start();
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            if end == 0 {
                break;
            }
            fields.push(&rest[..end]);
            rest = &rest[end..];
        }
        let mut words = rest.split_whitespace();
        if let (Some(a), Some(b)) = (words.next(), words.next())
            && a.parse::<u32>().is_ok()
            && b.trim_end_matches(';').parse::<u32>().is_ok()
        {
            let a_at = rest.find(a).unwrap_or(0);
            let b_at = a_at + a.len() + rest[a_at + a.len()..].find(b).unwrap_or(0);
            rest = &rest[b_at + b.len()..];
        }
        if fields.len() < 4 || rest.trim().is_empty() {
            return Err(err("fewer than four FEN fields and a bm operation".into()));
        }
        let fields = [fields[0], fields[1], fields[2], fields[3], rest];
        let fen = format!("{} 0 1", fields[..4].join(" "));
        let parsed: Fen = fen.parse().map_err(|e| err(format!("not a FEN: {e}")))?;
        let position: Chess = parsed
            .into_position(CastlingMode::Standard)
            .map_err(|e| err(format!("illegal position: {e}")))?;
        let bm = fields[4]
            .split(';')
            .map(str::trim)
            .find_map(|op| op.strip_prefix("bm "))
            .ok_or_else(|| err("no bm operation (the moves that solve it)".into()))?;
        let mut best = Vec::new();
        for san in bm.split_whitespace() {
            let m = san
                .parse::<SanPlus>()
                .map_err(|e| err(format!("bm {san}: {e}")))?
                .san
                .to_move(&position)
                .map_err(|e| err(format!("bm {san}: {e}")))?;
            best.push(m);
        }
        if best.is_empty() {
            return Err(err("bm names no move".into()));
        }
        out.push(Puzzle { position, best });
    }
    if out.is_empty() {
        return Err(BookError::Empty(name.into()));
    }
    Ok(out)
}

/// Movetext tokens that are moves: comments, variations, NAGs, move numbers and results go.
pub(crate) fn san_tokens(movetext: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let (mut depth, mut in_comment) = (0usize, false);
    let mut cur = String::new();
    let flush = |cur: &mut String, tokens: &mut Vec<String>| {
        let t = cur.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
        let result = ["1-0", "0-1", "1/2-1/2", "*"].contains(&cur.as_str());
        if !t.is_empty() && !t.starts_with('$') && !result {
            tokens.push(t.trim_end_matches(['!', '?']).to_string());
        }
        cur.clear();
    };
    for c in movetext.chars() {
        match c {
            '{' if !in_comment => in_comment = true,
            '}' if in_comment => in_comment = false,
            _ if in_comment => {}
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ if depth > 0 => {}
            c if c.is_whitespace() => flush(&mut cur, &mut tokens),
            c => cur.push(c),
        }
    }
    flush(&mut cur, &mut tokens);
    tokens
}

/// A PGN game as text: its tag pairs, in order, and its movetext (lines joined by spaces).
pub(crate) struct PgnGame {
    pub tags: Vec<(String, String)>,
    pub movetext: String,
}

impl PgnGame {
    pub(crate) fn tag(&self, name: &str) -> Option<&str> {
        self.tags
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Splits PGN text into games: a tag line after movetext starts the next game.
pub(crate) fn pgn_games(text: &str) -> Vec<PgnGame> {
    let mut games = Vec::new();
    let mut game = PgnGame {
        tags: Vec::new(),
        movetext: String::new(),
    };
    let mut in_moves = false;
    for line in text.trim_start_matches('\u{feff}').lines() {
        let t = line.trim();
        if t.starts_with('[') && t.ends_with(']') {
            if in_moves {
                games.push(std::mem::replace(
                    &mut game,
                    PgnGame {
                        tags: Vec::new(),
                        movetext: String::new(),
                    },
                ));
                in_moves = false;
            }
            let inner = &t[1..t.len() - 1];
            if let Some((k, v)) = inner.split_once(' ') {
                game.tags
                    .push((k.to_string(), v.trim().trim_matches('"').to_string()));
            }
        } else if !t.is_empty() {
            in_moves = true;
            game.movetext.push_str(t);
            game.movetext.push(' ');
        }
    }
    if in_moves || !game.tags.is_empty() {
        games.push(game);
    }
    games
}

fn parse_pgn(name: &str, text: &str) -> Result<Vec<Chess>, BookError> {
    let mut out = Vec::new();
    for (i, g) in pgn_games(text).into_iter().enumerate() {
        let err = |reason: String| BookError::Game {
            book: name.into(),
            game: i + 1,
            reason,
        };
        let mut pos = match g.tag("FEN") {
            Some(fen) => fen
                .parse::<Fen>()
                .map_err(|e| err(format!("the FEN tag is not a FEN: {e}")))?
                .into_position(CastlingMode::Standard)
                .map_err(|e| err(format!("the FEN tag is illegal: {e}")))?,
            None => Chess::default(),
        };
        for (ply, token) in san_tokens(&g.movetext).iter().enumerate() {
            let san: SanPlus = token
                .parse()
                .map_err(|_| err(format!("ply {}: not a move", ply + 1)))?;
            let mv = san
                .san
                .to_move(&pos)
                .map_err(|e| err(format!("ply {}: {san} is illegal here: {e}", ply + 1)))?;
            pos.play_unchecked(mv);
        }
        if pos.is_game_over() {
            return Err(err("the opening ends the game".into()));
        }
        out.push(pos);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epd_and_fen_lines() {
        let b = Book::parse(
            "b.epd",
            b"rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - c0 \"x\";\n\n\
              r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3\n",
        )
        .unwrap();
        assert_eq!(b.positions.len(), 2);
        assert_eq!(b.positions[1].halfmoves(), 2);
    }

    #[test]
    fn pgn_games_end_positions() {
        let pgn = "[Event \"a\"]\n\n1. e4 {best} e5 (1... c5 2. Nf3) 2. Nf3!? Nc6 $1 *\n\n\
                   [Event \"b\"]\n[FEN \"4k3/8/8/8/8/8/4P3/4K3 w - - 0 1\"]\n\n1. e4 Kd7 *\n\
                   [Event \"c\"]\n\n1. O-O *\n";
        let err = Book::parse("b.pgn", pgn.as_bytes()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "book b.pgn: game 3: ply 1: O-O is illegal here: illegal san"
        );
        let ok = &pgn[..pgn.find("[Event \"c\"]").unwrap()];
        let b = Book::parse("b.pgn", ok.as_bytes()).unwrap();
        assert_eq!(b.positions.len(), 2);
        assert_eq!(
            Fen::from_position(&b.positions[0], EnPassantMode::Legal).to_string(),
            "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"
        );
    }

    /// Errors reach API callers: they name the line, game and ply, never the file's bytes.
    #[test]
    fn errors_never_quote_the_file() {
        let secret = "root:x:0:0:secret:/root:/bin/bash";
        for (name, text) in [
            ("a.epd", format!("{secret}\n")),
            ("b.epd", format!("{secret} w - - 0 1\n")),
            ("c.pgn", format!("[Event \"x\"]\n\n1. {secret} *\n")),
            ("d.pgn", format!("[FEN \"{secret}\"]\n\n1. e4 *\n")),
        ] {
            let e = Book::parse(name, text.as_bytes()).unwrap_err().to_string();
            assert!(!e.contains("secret") && !e.contains("root:"), "{name}: {e}");
            assert!(e.starts_with(&format!("book {name}: ")), "{e}");
        }
    }

    #[test]
    fn bad_books_name_the_place() {
        let e = Book::parse(
            "x.epd",
            b"rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -\nnot a fen at all\n",
        )
        .unwrap_err();
        assert!(
            e.to_string().starts_with("book x.epd: line 2: not a FEN"),
            "{e}"
        );
        let e = Book::parse("x.epd", b"8/8/8/8/8/8/8/8 w - -\n").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("book x.epd: line 1: illegal position"),
            "{e}"
        );
        assert_eq!(
            Book::parse("e.epd", b"\n\n").unwrap_err(),
            BookError::Empty("e.epd".into())
        );
        assert_eq!(
            Book::parse("e.epd", &[0xff, 0xfe]).unwrap_err(),
            BookError::NotText("e.epd".into())
        );
    }

    /// Puzzles: `bm` moves in SAN (check marks allowed, several per line) become moves of
    /// their position; a line without `bm`, or with a move that is not legal there, is
    /// refused naming the line.
    #[test]
    fn puzzles_read_their_best_moves() {
        let epd = "# mates in one\n\
                   6k1/5ppp/8/8/8/8/8/R5K1 w - - bm Ra8#; id \"back rank\";\n\
                   r1bqkbnr/pppp1ppp/2n5/4p2Q/2B1P3/8/PPPP1PPP/RNB1K1NR w KQkq - bm Qxf7# Qxf7;\n";
        let p = parse_puzzles("p.epd", epd.as_bytes()).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].best.len(), 1);
        assert_eq!(p[0].best[0].to(), shakmaty::Square::A8);
        assert_eq!(p[1].best.len(), 2);
        // Any spacing, and a FEN with its move counters, read the same.
        let spaced = parse_puzzles(
            "p.epd",
            b"6k1/5ppp/8/8/8/8/8/R5K1  w  -  - 0 1 bm Ra8#; id \"a; b\";\n",
        )
        .unwrap();
        assert_eq!(spaced[0].best, p[0].best);
        for (text, says) in [
            ("6k1/5ppp/8/8/8/8/8/R5K1 w - - id \"x\";", "line 1: no bm"),
            ("6k1/5ppp/8/8/8/8/8/R5K1 w - - bm Rb9;", "line 1: bm Rb9"),
            ("6k1/5ppp/8/8/8/8/8/R5K1 w - - bm Qh5;", "line 1: bm Qh5"),
            ("", "has no positions"),
        ] {
            let e = parse_puzzles("p.epd", text.as_bytes())
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{text}: {e}");
        }
    }
}
