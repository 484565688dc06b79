import Foundation
import HTTPServer
import PixieWire
import PrivacyPass
import SiblingsCrypto
import Storage
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// blob-svc (000_e422bd9a7c930342.txt): short-lived storage for bytes the service cannot read, such as the
/// AES-256-GCM ciphertext that BlobCrypto.seal makes of a sibling's snapshot.
///
/// - `POST /v1/blobs`: the body is the blob and `Content-Type` its mime type. Authenticated with a session
///   (`Authorization: Bearer`, budgeted per account per hour) or a rate-limit token
///   (`Authorization: PrivateToken token=...`, spent through ``TokenSpender``). Streamed to a file in constant
///   memory, capped per mime type by ``capForMime(_:)``. Answers `201 {"blob_id", "size_bytes", "sha256",
///   "expires_at"}`.
/// - `GET`/`HEAD /v1/blobs/{blob_id}`: unauthenticated, since the blob_id is the capability (16 random
///   bytes). Streams the bytes as stored, with one `Range` at a time.
/// - `DELETE /v1/blobs/{blob_id}`: the recipient's ack, deleting the blob at once; knowing the id suffices.
///
/// Blobs live ``Configuration/ttl`` (24 hours by default); ``runSweeper()`` deletes the expired ones.
/// The bytes are in ``Configuration/store`` (``LocalBlobStore``: `tmp/` while uploading, then `<blob_id>`).
public struct BlobService: Sendable {
    public struct Configuration: Sendable {
        /// Where the bytes are: `<data_dir>/blobs` (or `blob_dir`), one file per blob named by its blob_id.
        public var store: any BlobStore
        /// How long an upload left midway, or bytes no record claims, must be untouched before the sweeper
        /// removes them: longer than any upload goes without writing, so that in a store several nodes share
        /// no node takes another's upload in progress.
        public var orphanAge: TimeInterval = 3600
        /// The cap for every mime type but the sync one (`blob_max_bytes`).
        public var maxBlobBytes = 16 << 20
        /// The cap for `application/x-pixie-sync`, a whole-device snapshot (`sync_max_blob_bytes`).
        public var syncMaxBlobBytes = 4 << 30
        /// How long a blob lives after its upload (`blob_ttl`).
        public var ttl: TimeInterval = 86_400
        /// How often the sweeper deletes expired blobs (`blob_sweep_interval`).
        public var sweepInterval: Duration = .seconds(60)
        /// Uploads one account may make per clock hour with a session (`blob_uploads_per_hour`).
        public var uploadsPerAccountPerHour = 60
        /// Bytes one account may upload per clock hour with a session (`blob_bytes_per_hour`).
        public var bytesPerAccountPerHour: Int64 = 16 << 30
        /// Bytes each rate-limit token spent on an upload buys (`blob_bytes_per_token`): an upload paid with
        /// tokens may be as large as the tokens it spends buy, and no larger. At most
        /// ``maximumTokensPerUpload`` tokens go into one upload.
        public var bytesPerToken: Int64 = 1 << 20
        /// Bytes each upload-class token buys (`CredentialAPI.TokenClass.upload`, minted to sessions only, 256 an
        /// hour per account): 64 MiB, so the 64 tokens one upload carries buy the 4 GiB sync cap, and a sibling
        /// pays a whole-store snapshot without a session, unlinked from its account.
        public var bytesPerUploadToken: Int64 = BlobAPI.bytesPerUploadToken
        /// Take uploads that carry no `Authorization` at all (`blob_allow_anonymous_uploads`): for benchmarks
        /// and development only. An upload that carries `Authorization` is still checked (session or token).
        public var allowAnonymousUploads = false

        public init(store: any BlobStore) { self.store = store }

        /// Blobs as files in `directory` (``LocalBlobStore``).
        public init(directory: URL) { self.init(store: LocalBlobStore(directory: directory)) }
    }

    /// The mime type of a sealed onboarding snapshot, which gets the larger sync cap.
    public static let syncMimeType = "application/x-pixie-sync"
    static let component = "blob"
    static let migrations = [
        Migration(
            version: 1,
            sql: """
                CREATE TABLE blobs (
                    blob_id TEXT PRIMARY KEY,
                    mime TEXT NOT NULL,
                    size_bytes BIGINT NOT NULL,
                    sha256 BLOB NOT NULL,
                    created_at BIGINT NOT NULL,
                    expires_at BIGINT NOT NULL
                );
                CREATE INDEX blobs_by_expiry ON blobs (expires_at);
                CREATE TABLE blob_budgets (
                    account_id TEXT NOT NULL,
                    window_start BIGINT NOT NULL,
                    uploads BIGINT NOT NULL,
                    bytes BIGINT NOT NULL,
                    PRIMARY KEY (account_id, window_start)
                );
                """)
    ]

    public let configuration: Configuration
    let database: any SQLDatabase
    let tokens: any TokenSpender
    /// The upload-class tokens' spender, and their token_key_id (what tells an upload token from a send token,
    /// in clear in every token).
    let uploadTokens: (spender: any TokenSpender, keyID: Data)?
    let authenticateSession: (@Sendable (HTTPRequest) throws -> Session)?
    let clock: PixieClock
    let random: any SecureRandomSource
    let logger: Logger
    let metrics: Metrics
    /// Temporary file names and blob ids of uploads still running, which the orphan sweep must not touch.

    /// `authenticateSession` checks `Authorization: Bearer` sessions (identity-svc's); without one, only
    /// rate-limit tokens are accepted.
    /// `uploadTokens` spends upload-class tokens (those whose token_key_id is its `keyID`); without it, only
    /// send-class tokens pay.
    public init(
        database: any SQLDatabase, tokens: any TokenSpender,
        uploadTokens: (spender: any TokenSpender, keyID: Data)? = nil,
        authenticateSession: (@Sendable (HTTPRequest) throws -> Session)?, configuration: Configuration,
        clock: PixieClock = .system, logger: Logger, metrics: Metrics
    ) throws(ServerError) {
        try self.init(
            database: database, tokens: tokens, uploadTokens: uploadTokens, authenticateSession: authenticateSession,
            configuration: configuration, clock: clock, random: SystemRandom(), logger: logger, metrics: metrics)
    }

    /// The same, with `random` for codes, IDs and keys (`@_spi(Testing)`: tests make them deterministic).
    @_spi(Testing)
    public init(
        database: any SQLDatabase, tokens: any TokenSpender,
        uploadTokens: (spender: any TokenSpender, keyID: Data)? = nil,
        authenticateSession: (@Sendable (HTTPRequest) throws -> Session)?, configuration: Configuration,
        clock: PixieClock = .system, random: any SecureRandomSource, logger: Logger,
        metrics: Metrics
    ) throws(ServerError) {
        do {
            try database.migrate(component: Self.component, migrations: Self.migrations)
        } catch {
            throw ServerError(.storage, "blob's tables could not be migrated: \(error)")
        }
        self.database = database
        self.tokens = tokens
        self.uploadTokens = uploadTokens
        self.authenticateSession = authenticateSession
        self.configuration = configuration
        self.clock = clock
        self.random = random
        self.logger = logger
        self.metrics = metrics
        metrics.describe("pixie_blob_uploads_total", type: "counter", help: "Blob uploads, by result.")
        metrics.describe("pixie_blob_uploaded_bytes_total", type: "counter", help: "Bytes of blobs stored.")
        metrics.describe("pixie_blob_deleted_total", type: "counter", help: "Blobs deleted, by reason.")
    }

    /// The largest body accepted for `mime` (the seed's cap_for_mime): ``Configuration/syncMaxBlobBytes`` for
    /// `application/x-pixie-sync`, ``Configuration/maxBlobBytes`` for anything else. Parameters and case are
    /// ignored.
    public func capForMime(_ mime: String) -> Int {
        Self.essence(of: mime) == Self.syncMimeType ? configuration.syncMaxBlobBytes : configuration.maxBlobBytes
    }

    public func addRoutes(to router: inout Router) {
        let limit = max(configuration.maxBlobBytes, configuration.syncMaxBlobBytes)
        router.on(PixieAPI.uploadBlob, body: .stream(limit: limit)) { request, _ in try await upload(request) }
        router.on(PixieAPI.downloadBlob) { request, context in
            try download(request, blobID: try context.parameter("blob_id"))
        }
        router.on(PixieAPI.ackBlob) { _, context in try acknowledge(blobID: try context.parameter("blob_id")) }
    }

    // MARK: - Upload

    enum Credential {
        case anonymous
        case session
        /// One to ``maximumTokensPerUpload`` tokens, each buying ``Configuration/bytesPerToken``.
        case privateTokens([Data])
    }

    /// The most tokens one upload's `Authorization` may carry. With the default 1 MiB a send-class token, such an
    /// upload is at most 64 MiB, while those tokens come at 40 an hour per number and 600 an hour per account; a
    /// whole-store snapshot of gigabytes is paid with upload-class tokens (64 MiB each, minted to sessions only,
    /// 256 an hour per account) or a session (``Configuration/bytesPerAccountPerHour``).
    public static let maximumTokensPerUpload = 64

    func upload(_ request: HTTPRequest) async throws -> HTTPResponse {
        let credential: Credential =
            configuration.allowAnonymousUploads && request.headers["Authorization"] == nil
            ? .anonymous : try Self.credential(of: request)
        let mime = try Self.mimeType(of: request)
        let cap = capForMime(mime)
        let declared = request.headers["Content-Length"].flatMap { Int64($0) }
        if let declared, declared > Int64(cap) {
            metrics.increment("pixie_blob_uploads_total", labels: ["result": "too_large"])
            throw Self.tooLarge(cap: cap, mime: mime)
        }
        // The bytes this upload may take: what is left of its account's hourly budget, or what its tokens buy.
        var budget = Int64.max
        var beyond = Self.overBudget()
        var account: String?
        switch credential {
        case .anonymous:
            break
        case .session:
            guard let authenticateSession else {
                throw HTTPError(
                    .unauthorized, .unauthorized,
                    "this server does not run identity-svc, so it takes no sessions; send a PrivateToken")
            }
            let session = try authenticateSession(request)
            account = session.accountID
            budget = try reserveUpload(account: session.accountID, declared: declared)
        case .privateTokens(let presented):
            // Upload-class tokens (their token_key_id says so, in clear) buy more than send-class ones; which class
            // a token is of is all blob-svc learns from it.
            let isUpload = presented.map { raw in
                guard let uploadTokens, let token = try? Token(rawRepresentation: raw) else { return false }
                return token.tokenKeyID == uploadTokens.keyID
            }
            let uploads = Int64(isUpload.count { $0 })
            let sends = Int64(presented.count) - uploads
            let (forUploads, overflowA) = uploads.multipliedReportingOverflow(by: configuration.bytesPerUploadToken)
            let (forSends, overflowB) = sends.multipliedReportingOverflow(by: configuration.bytesPerToken)
            let (bought, overflowC) = forUploads.addingReportingOverflow(forSends)
            budget = overflowA || overflowB || overflowC ? .max : bought
            beyond = Self.beyondTokens(presented.count, budget: budget, declared: nil)
            if let declared, declared > budget {
                // Refused before anything is spent: the client can send more tokens.
                metrics.increment("pixie_blob_uploads_total", labels: ["result": "rate_limited"])
                throw Self.beyondTokens(presented.count, budget: budget, declared: declared)
            }
            // Every token must verify and be unspent; those that did are spent even if another did not.
            let sendTokens = presented.indices.filter { !isUpload[$0] }.map { presented[$0] }
            let uploadClass = presented.indices.filter { isUpload[$0] }.map { presented[$0] }
            var results = tokens.spend(sendTokens)
            if let spender = uploadTokens?.spender { results += spender.spend(uploadClass) }
            for result in results { try result.get() }
        }
        guard let stream = request.bodyStream else {
            throw HTTPError(.internalServerError, .internalError, "the upload route did not stream its body")
        }
        let stored: StoredBlob
        do {
            stored = try await store(stream, cap: cap, budget: budget, beyond: beyond, mime: mime)
        } catch let error as HTTPError {
            let result = error.code == .contentTooLarge ? "too_large" : error.code.rawValue
            metrics.increment("pixie_blob_uploads_total", labels: ["result": result])
            throw error
        } catch {
            metrics.increment("pixie_blob_uploads_total", labels: ["result": "failed"])
            logger.error("an upload could not be stored", ["error": "\(error)"])
            throw HTTPError(.serviceUnavailable, .storage, "the blob could not be stored; try again shortly")
        }
        if let account {
            _ = try PixieServer.store(logger) {
                try database.execute(
                    "UPDATE blob_budgets SET bytes = bytes + ? WHERE account_id = ? AND window_start = ?",
                    [.integer(stored.size), .text(account), .integer(Self.window(clock.now()))])
            }
        }
        metrics.increment("pixie_blob_uploads_total", labels: ["result": "stored"])
        metrics.increment("pixie_blob_uploaded_bytes_total", by: Double(stored.size))
        return try .json(
            BlobAPI.UploadResponse(
                blobID: stored.id, sizeBytes: stored.size, sha256: stored.sha256.base64URLEncodedString(),
                expiresAt: stored.expiresAt), status: .created)
    }

    /// The credential the `Authorization` header carries, or a 401.
    static func credential(of request: HTTPRequest) throws(HTTPError) -> Credential {
        guard let header = request.headers["Authorization"]?.trimmingCharacters(in: .whitespaces) else {
            throw HTTPError(
                .unauthorized, .unauthorized,
                "uploads need Authorization: Bearer <session token> or PrivateToken token=<base64url token>")
        }
        let parts = header.split(separator: " ", maxSplits: 1)
        let scheme = parts.first.map { $0.lowercased() } ?? ""
        if scheme == "bearer" { return .session }
        guard scheme == "privatetoken", parts.count == 2 else {
            throw HTTPError(
                .unauthorized, .unauthorized, "the Authorization scheme must be Bearer or PrivateToken (RFC 9577)")
        }
        // RFC 9577 §2.2: `PrivateToken token="<base64url>"`, the quotes optional; other parameters are ignored.
        // An upload may carry several `token=` parameters, each buying more bytes.
        var presented: [Data] = []
        for parameter in parts[1].split(separator: ",") {
            let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard pair.count == 2, pair[0].lowercased() == "token" else { continue }
            var value = pair[1]
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") {
                value = String(value.dropFirst().dropLast())
            }
            let padding = CharacterSet(charactersIn: "=")
            guard let token = Data(base64URLEncoded: value.trimmingCharacters(in: padding)), !token.isEmpty else {
                throw HTTPError(
                    .unauthorized, .tokenInvalid, "a PrivateToken token= parameter is not base64url; send the token")
            }
            presented.append(token)
        }
        guard !presented.isEmpty else {
            throw HTTPError(.unauthorized, .tokenInvalid, "the PrivateToken header must carry token=<base64url token>")
        }
        guard presented.count <= maximumTokensPerUpload else {
            throw HTTPError(
                .badRequest, .badRequest,
                "one upload carries at most \(maximumTokensPerUpload) tokens; this one carries \(presented.count)")
        }
        return .privateTokens(presented)
    }

    static func beyondTokens(_ count: Int, budget: Int64, declared: Int64?) -> HTTPError {
        let tokens = count == 1 ? "1 token buys" : "\(count) tokens buy"
        let size = declared.map { "is \($0) bytes" } ?? "went past that"
        return HTTPError(
            .tooManyRequests, .rateLimited,
            "\(tokens) \(budget) bytes of upload, and this one \(size); send more tokens (at most "
                + "\(maximumTokensPerUpload)), or upload with a session")
    }

    /// The upload's `Content-Type`, checked to be a `type/subtype` with printable parameters (it is sent back
    /// as a header), or a 415.
    static func mimeType(of request: HTTPRequest) throws(HTTPError) -> String {
        let value = request.headers["Content-Type"]?.trimmingCharacters(in: .whitespaces) ?? ""
        let token = CharacterSet(charactersIn: "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz")
        let essence = Self.essence(of: value)
        let halves = essence.split(separator: "/", omittingEmptySubsequences: false)
        guard value.count <= 255, value.unicodeScalars.allSatisfy({ (0x20...0x7E).contains($0.value) }),
            halves.count == 2, halves.allSatisfy({ !$0.isEmpty && $0.unicodeScalars.allSatisfy(token.contains) })
        else {
            throw HTTPError(
                .unsupportedMediaType, .unsupportedMediaType,
                "the Content-Type must be the blob's mime type, type/subtype (application/x-pixie-sync for a "
                    + "sync snapshot)")
        }
        return value
    }

    /// `type/subtype` in lower case, without parameters.
    static func essence(of mime: String) -> String {
        (mime.split(separator: ";", maxSplits: 1).first.map(String.init) ?? "").trimmingCharacters(in: .whitespaces)
            .lowercased()
    }

    static func tooLarge(cap: Int, mime: String) -> HTTPError {
        HTTPError(
            .contentTooLarge, .contentTooLarge,
            "a blob of type \(essence(of: mime)) may be at most \(cap) bytes; send less")
    }

    /// The clock hour a budget counts in.
    static func window(_ date: Date) -> Int64 { date.unixSeconds / 3600 * 3600 }

    /// Counts one upload against `account`'s hour and returns the bytes it may still upload, or a 429.
    func reserveUpload(account: String, declared: Int64?) throws -> Int64 {
        let window = Self.window(clock.now())
        let outcome = try PixieServer.store(logger) { () throws -> Int64? in
            try database.transaction { transaction in
                let row = try transaction.queryOne(
                    "SELECT uploads, bytes FROM blob_budgets WHERE account_id = ? AND window_start = ?",
                    [.text(account), .integer(window)])
                let uploads = try row?.int64("uploads") ?? 0
                let remaining = configuration.bytesPerAccountPerHour - (try row?.int64("bytes") ?? 0)
                guard uploads < Int64(configuration.uploadsPerAccountPerHour), remaining > 0,
                    (declared ?? 0) <= remaining
                else { return nil }
                try transaction.execute(
                    "INSERT INTO blob_budgets (account_id, window_start, uploads, bytes) VALUES (?, ?, 1, 0) "
                        + "ON CONFLICT (account_id, window_start) DO UPDATE SET uploads = blob_budgets.uploads + 1",
                    [.text(account), .integer(window)])
                return remaining
            }
        }
        guard let outcome else {
            metrics.increment("pixie_blob_uploads_total", labels: ["result": "rate_limited"])
            throw Self.overBudget()
        }
        return outcome
    }

    static func overBudget() -> HTTPError {
        HTTPError(
            .tooManyRequests, .rateLimited,
            "this account has used its blob upload budget for this hour; try again next hour",
            headers: ["Retry-After": "3600"])
    }

    struct StoredBlob {
        let id: String
        let size: Int64
        let sha256: Data
        let expiresAt: Int64
    }

    /// Streams `body` into the store, makes it durable under a new blob_id and records it. Anything that goes
    /// wrong, a client that vanishes included, leaves no bytes and no row.
    /// `budget` is the most bytes it may take, with `beyond` thrown past it.
    func store(
        _ body: HTTPBodyStream, cap: Int, budget: Int64, beyond: HTTPError = overBudget(), mime: String
    ) async throws -> StoredBlob {
        let upload = try configuration.store.beginUpload()
        var hasher = SHA256()
        var size: Int64 = 0
        let blobID = random.bytes(count: 16).base64URLEncodedString()
        do {
            for try await chunk in body {
                size += Int64(chunk.count)
                if size > Int64(cap) { throw Self.tooLarge(cap: cap, mime: mime) }
                if size > budget { throw beyond }
                hasher.update(data: chunk)
                try upload.write(chunk)
            }
            try await configuration.store.commit(upload, as: blobID)
            // A request answered 503 for taking too long (request_timeout) while fsync ran must store nothing.
            try Task.checkCancellation()
        } catch {
            upload.abandon()
            configuration.store.delete(blobID)
            throw error
        }
        let sha256 = Data(hasher.finalize().rawRepresentation)
        let now = clock.now()
        let expiresAt = now.unixSeconds + Int64(configuration.ttl)
        do {
            try database.execute(
                "INSERT INTO blobs (blob_id, mime, size_bytes, sha256, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
                [
                    .text(blobID), .text(mime), .integer(size), .blob(sha256), .integer(now.unixSeconds),
                    .integer(expiresAt),
                ])
        } catch {
            configuration.store.delete(blobID)
            throw error
        }
        return StoredBlob(id: blobID, size: size, sha256: sha256, expiresAt: expiresAt)
    }

    // MARK: - Download and ack

    struct BlobRecord {
        let mime: String
        let size: Int64
        let sha256: Data
    }

    /// The live blob `blobID`, or a 404 that is the same for an id never issued, expired, or acked.
    func record(_ blobID: String) throws -> BlobRecord {
        let notFound = HTTPError(.notFound, .notFound, "there is no such blob; it may have expired or been acked")
        guard Self.isWellFormed(blobID) else { throw notFound }
        let row = try PixieServer.store(logger) {
            try database.queryOne(
                "SELECT mime, size_bytes, sha256 FROM blobs WHERE blob_id = ? AND expires_at > ?",
                [.text(blobID), .integer(clock.now().unixSeconds)])
        }
        guard let row else { throw notFound }
        return try PixieServer.store(logger) {
            BlobRecord(mime: try row.string("mime"), size: try row.int64("size_bytes"), sha256: try row.data("sha256"))
        }
    }

    /// 22 base64url characters: 16 bytes. Anything else is never looked up (nor used as a file name).
    static func isWellFormed(_ blobID: String) -> Bool {
        blobID.utf8.count == 22 && Data(base64URLEncoded: blobID)?.count == 16
    }

    func download(_ request: HTTPRequest, blobID: String) throws -> HTTPResponse {
        let record = try record(blobID)
        var headers: HTTPHeaders = [
            "Content-Type": record.mime, "Accept-Ranges": "bytes",
            "ETag": "\"\(record.sha256.base64URLEncodedString())\"", "Cache-Control": "private, no-store",
            "X-Content-Type-Options": "nosniff",
        ]
        let store = configuration.store
        let range: ClosedRange<Int64>
        switch Self.byteRange(request.headers["Range"], size: record.size) {
        case .whole:
            guard record.size > 0 else { return .stream(headers: headers, length: 0) { _ in } }
            return .stream(headers: headers, length: Int(record.size)) { writer in
                try await Self.send(store, blobID, 0...(record.size - 1), size: record.size, to: writer)
            }
        case .unsatisfiable:
            throw HTTPError(
                .rangeNotSatisfiable, .rangeNotSatisfiable,
                "the range is outside the blob's \(record.size) bytes; ask for bytes=0-\(max(0, record.size - 1))",
                headers: ["Content-Range": "bytes */\(record.size)", "Accept-Ranges": "bytes"])
        case .partial(let bytes):
            range = bytes
        }
        headers["Content-Range"] = "bytes \(range.lowerBound)-\(range.upperBound)/\(record.size)"
        return .stream(status: .partialContent, headers: headers, length: Int(range.count)) { writer in
            try await Self.send(store, blobID, range, size: record.size, to: writer)
        }
    }

    /// Writes bytes `range` of `blobID` (opened only now, so a HEAD opens nothing).
    static func send(
        _ store: any BlobStore, _ blobID: String, _ range: ClosedRange<Int64>, size: Int64, to writer: HTTPBodyWriter
    ) async throws {
        let file = try store.open(blobID)
        defer { file.close() }
        guard try file.size() == size else {
            throw ServerError(.storage, "the bytes of blob \(blobID) are not the size recorded for them")
        }
        try file.seek(to: range.lowerBound)
        var remaining = Int64(range.count)
        while remaining > 0 {
            let chunk = try file.read(upTo: Int(min(remaining, 256 << 10)))
            guard !chunk.isEmpty else { throw ServerError(.storage, "the bytes of blob \(blobID) ended early") }
            remaining -= Int64(chunk.count)
            try await writer.write(chunk)
        }
    }

    enum ByteRange: Equatable {
        case whole
        case partial(ClosedRange<Int64>)
        case unsatisfiable
    }

    /// The single range a `Range` header asks for (RFC 9110 §14.2): `bytes=a-b`, `bytes=a-` or `bytes=-n`.
    /// No header, another unit, a malformed value or several ranges get the whole blob (RFC 9110 lets a server
    /// ignore `Range`); a range that starts past the end, or a suffix of 0, is unsatisfiable.
    static func byteRange(_ header: String?, size: Int64) -> ByteRange {
        guard let header = header?.trimmingCharacters(in: .whitespaces), header.lowercased().hasPrefix("bytes=")
        else { return .whole }
        let spec = header.dropFirst(6).trimmingCharacters(in: .whitespaces)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return .whole }
        let first = spec[..<dash]
        let last = spec[spec.index(after: dash)...]
        let digits = CharacterSet.decimalDigits
        guard first.unicodeScalars.allSatisfy(digits.contains), last.unicodeScalars.allSatisfy(digits.contains) else {
            return .whole
        }
        if first.isEmpty {
            guard let suffix = Int64(last) else { return .whole }
            guard suffix > 0, size > 0 else { return .unsatisfiable }
            return .partial(max(0, size - suffix)...(size - 1))
        }
        guard let start = Int64(first) else { return .whole }
        if last.isEmpty { return start < size ? .partial(start...(size - 1)) : .unsatisfiable }
        guard let end = Int64(last), end >= start else { return .whole }
        return start < size ? .partial(start...min(end, size - 1)) : .unsatisfiable
    }

    /// `DELETE /v1/blobs/{blob_id}`: the recipient has the bytes; delete them now rather than at expiry.
    func acknowledge(blobID: String) throws -> HTTPResponse {
        _ = try record(blobID)
        let deleted = try PixieServer.store(logger) {
            try database.execute("DELETE FROM blobs WHERE blob_id = ?", [.text(blobID)])
        }
        guard deleted > 0 else {
            throw HTTPError(.notFound, .notFound, "there is no such blob; it may have expired or been acked")
        }
        configuration.store.delete(blobID)
        metrics.increment("pixie_blob_deleted_total", labels: ["reason": "acked"])
        return HTTPResponse(status: .noContent)
    }
}

extension HTTPError.Code {
    static let unsupportedMediaType = HTTPError.Code("unsupported_media_type")
    static let rangeNotSatisfiable = HTTPError.Code("range_not_satisfiable")
}
