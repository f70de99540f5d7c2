use lakefish_schemas::NameError;

/// Why a job (or a lake operation) failed. Messages are lowercase and name the object,
/// file or byte offset involved.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error("lake {op} {key}: {source}")]
    Lake {
        op: &'static str,
        key: String,
        #[source]
        source: object_store::Error,
    },
    #[error("cannot open the lake {spec:?}: {reason}")]
    LakeConfig { spec: String, reason: String },
    #[error("input {input}: {reason}")]
    Input { input: String, reason: String },
    #[error("{input} is larger than the limit of {max} bytes; nothing was stored")]
    TooLarge { input: String, max: u64 },
    #[error(
        "{key} already holds other bytes; raw objects are immutable: upload under another name, or replace it to store a new version (?replace=true in the API, --replace in the CLI), which ingests then see as another input"
    )]
    ObjectExists { key: String },
    #[error("{0}")]
    Name(#[from] NameError),
    #[error("dataset {dataset} already exists, written from {existing}; pick a new dataset name")]
    DatasetExists { dataset: String, existing: String },
    #[error("corrupt {what} {key}: {reason}")]
    Corrupt {
        what: &'static str,
        key: String,
        reason: String,
    },
    #[error(
        "dataset {dataset} is being written by job {job} ({owner}); its claim expires at {expires} unless renewed, after which another ingest takes it over"
    )]
    DatasetBusy {
        dataset: String,
        job: String,
        owner: String,
        expires: String,
    },
    #[error(
        "mask {mask} already exists with another definition ({existing}); pick a new mask name"
    )]
    MaskExists { mask: String, existing: String },
    #[error("a bug stopped the job ({0}); please report it")]
    Panic(String),
    #[error("nothing could be ingested: {0}")]
    NothingIngested(String),
    #[error("writing parquet part {key}: {reason}")]
    Parquet { key: String, reason: String },
    /// Something asked for by name does not exist (the message names it).
    #[error("{0}")]
    NotFound(String),
    /// A spec or payload that cannot be run as given: the message says what is wrong, in
    /// the words of the one who gave it (no "payload" jargon for a CLI user).
    #[error("{0}")]
    Payload(String),
    /// A request that does not hold together (an engine registration, a side's option):
    /// the message says what and why.
    #[error("{0}")]
    Invalid(String),
    /// A request for something its sender may not do (an engine option no admin allowed):
    /// the message names what and why.
    #[error("{0}")]
    Forbidden(String),
    /// An engine name already registered with other settings.
    #[error("engine {name} is registered with other settings; remove it first")]
    EngineExists { name: String },
    /// One of our own values could not be written as JSON: a bug, never retried.
    #[error("encoding JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// Columns that do not fit together: a bug or damaged data, never retried.
    #[error("arrow: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),
    /// A state another job or service is about to change (a pass not finished yet, a queue
    /// reconnecting): the same job should succeed later.
    #[error("{0} (to be tried again)")]
    Retry(String),
    /// A bug or an impossible state: reported, never retried.
    #[error("internal error: {0}")]
    Internal(String),
    /// A job that failed for a reason given in full (the trainer's errors, for one).
    #[error("{0}")]
    Failed(String),
    /// A request that contradicts what is stored (cancelling a finished job): nothing changed.
    #[error("{0}")]
    Conflict(String),
    /// The job stopped because a user cancelled it (the message says who and when).
    #[error("{0}")]
    Cancelled(String),
}

/// What kind of failure an error is: the one classification from which both the queue's
/// retry rule ([`JobError::is_transient`]) and the HTTP status (the services' `ApiError`) are
/// derived, so the two cannot disagree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// The request or spec is wrong as given (400): the message says what.
    Invalid,
    /// The sender may not do this (403).
    Forbidden,
    /// Something named does not exist (404).
    NotFound,
    /// It contradicts what is stored (409): nothing was changed.
    Conflict,
    /// Larger than a limit (413): nothing was stored.
    TooLarge,
    /// Storage or a service did not answer, or a state is about to change: the same job
    /// should succeed later (retried by the queue; 503).
    Unavailable,
    /// The job failed for a reason its message gives in full; it would fail again (500).
    Failed,
    /// A bug, damaged data or an impossible state (500).
    Internal,
}

impl ErrorCode {
    pub fn is_transient(self) -> bool {
        self == ErrorCode::Unavailable
    }
}

impl JobError {
    /// Its [`ErrorCode`]. No wildcard: a new variant does not compile until it is classified.
    pub fn code(&self) -> ErrorCode {
        match self {
            JobError::Name(_)
            | JobError::Input { .. }
            | JobError::Payload(_)
            | JobError::Invalid(_) => ErrorCode::Invalid,
            JobError::Forbidden(_) => ErrorCode::Forbidden,
            JobError::NotFound(_) => ErrorCode::NotFound,
            JobError::DatasetExists { .. }
            | JobError::ObjectExists { .. }
            | JobError::DatasetBusy { .. }
            | JobError::MaskExists { .. }
            | JobError::EngineExists { .. }
            | JobError::Conflict(_) => ErrorCode::Conflict,
            JobError::TooLarge { .. } => ErrorCode::TooLarge,
            JobError::Lake { .. } | JobError::Retry(_) => ErrorCode::Unavailable,
            JobError::NothingIngested(_)
            | JobError::Parquet { .. }
            | JobError::Failed(_)
            | JobError::Cancelled(_) => ErrorCode::Failed,
            JobError::LakeConfig { .. }
            | JobError::Corrupt { .. }
            | JobError::Panic(_)
            | JobError::Json(_)
            | JobError::Arrow(_)
            | JobError::Internal(_) => ErrorCode::Internal,
        }
    }

    /// Could the same job succeed if tried again later? The one retry rule, asked by the queue,
    /// the pipeline driver and the ingest's clean-up: storage that did not answer (after its
    /// own retries) and [`JobError::Retry`] states are transient ([`ErrorCode::Unavailable`]);
    /// bad input, bad specs, panics and bugs fail the same way every time and are never retried.
    pub fn is_transient(&self) -> bool {
        self.code().is_transient()
    }

    /// The same error with `prefix` before a caller-facing message (bad payload, forbidden).
    pub fn prefixed(self, prefix: &str) -> Self {
        match self {
            JobError::Payload(m) => JobError::Payload(format!("{prefix}{m}")),
            JobError::Invalid(m) => JobError::Invalid(format!("{prefix}{m}")),
            JobError::Forbidden(m) => JobError::Forbidden(format!("{prefix}{m}")),
            other => other,
        }
    }

    pub fn lake(op: &'static str, key: impl Into<String>, source: object_store::Error) -> Self {
        JobError::Lake {
            op,
            key: key.into(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_storage_and_retry_states_are_transient() {
        let lake = JobError::lake(
            "get",
            "k",
            object_store::Error::NotImplemented {
                operation: "get".into(),
                implementer: "test".into(),
            },
        );
        assert!(lake.is_transient());
        assert!(JobError::Retry("pile 3 is not done".into()).is_transient());
        for never in [
            JobError::Internal("a bug".into()),
            JobError::Panic("loader".into()),
            JobError::Payload("bad spec".into()),
            JobError::Failed("trainer".into()),
            JobError::Input {
                input: "x".into(),
                reason: "refused".into(),
            },
            JobError::NotFound("net".into()),
        ] {
            assert!(!never.is_transient(), "{never}");
        }
    }
}
