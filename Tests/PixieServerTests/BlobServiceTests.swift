import Foundation
import HTTPServer
import PixieServer
import SiblingsCrypto
import Testing

/// blob-svc in memory: one application on an in-memory store, a manual clock and a temporary data directory.
struct BlobFixture {
    let fixture: Fixture
    let tokens = InMemoryTokenSpender()
    var directory: URL { fixture.dataDirectory.url }
    var blob: BlobService { fixture.application.blob! }
    var blobs: URL { directory.appendingPathComponent("blobs") }

    init(
        services: [PixieConfiguration.Service] = [.blob], configure: (inout PixieConfiguration) -> Void = { _ in }
    ) throws {
        fixture = try Fixture(services: services, tokens: tokens) { configuration in
            configuration.blobMaxBytes = 1000
            configuration.syncMaxBlobBytes = 1 << 20
            configure(&configuration)
        }
    }

    /// A fresh token that will verify once.
    func token() -> Data {
        let token = SecureRandom.bytes(count: 32)
        tokens.issue([token])
        return token
    }

    func upload(
        _ body: Data, mime: String = "application/octet-stream", declareLength: Bool = true,
        authorization: String? = "mint"
    ) async -> HTTPResponse {
        var headers: HTTPHeaders = ["Content-Type": mime]
        if declareLength { headers["Content-Length"] = String(body.count) }
        if let authorization {
            headers["Authorization"] =
                authorization == "mint" ? "PrivateToken token=\(token().base64URLEncodedString())" : authorization
        }
        return await fixture.router.test(.post, "/v1/blobs", headers: headers, body: body)
    }

    func get(_ blobID: String, range: String? = nil, method: HTTPMethod = .get) async -> HTTPResponse {
        var headers = HTTPHeaders()
        if let range { headers["Range"] = range }
        return await fixture.router.test(method, "/v1/blobs/\(blobID)", headers: headers)
    }

    /// Files under `blobs/` and `blobs/tmp/` (none when nothing is stored).
    func files() -> [String] {
        let manager = FileManager.default
        let top = ((try? manager.contentsOfDirectory(atPath: blobs.path)) ?? []).filter { $0 != "tmp" }
        let temporary = (try? manager.contentsOfDirectory(atPath: blobs.appendingPathComponent("tmp").path)) ?? []
        return top + temporary.map { "tmp/\($0)" }
    }

    func rows() throws -> Int64 { try fixture.count("blobs") }
}

@Suite("blob-svc")
struct BlobServiceTests {
    @Test func capForMimeGivesTheSyncTypeTheLargerCap() throws {
        let blob = try BlobFixture().blob
        #expect(blob.capForMime("application/x-pixie-sync") == 1 << 20)
        #expect(blob.capForMime("Application/X-Pixie-Sync; v=1") == 1 << 20)
        #expect(blob.capForMime("image/jpeg") == 1000)
        #expect(blob.capForMime("application/octet-stream") == 1000)
    }

    @Test func oneByteOverTheCapIsRefusedBeforeAnythingIsStored() async throws {
        let blobs = try BlobFixture()
        for (stored, declare) in [true, false].enumerated() {
            let over = await blobs.upload(SecureRandom.bytes(count: 1001), declareLength: declare)
            #expect(over.status == .contentTooLarge, "declared \(declare): \(over.bodyText)")
            #expect(over.errorCode == "content_too_large")
            #expect(try blobs.rows() == Int64(stored))
            #expect(blobs.files().count == stored)
            #expect(await blobs.upload(SecureRandom.bytes(count: 1000), declareLength: declare).status == .created)
        }
        // The sync type takes more than the default cap, up to its own.
        let sync = "application/x-pixie-sync"
        #expect(await blobs.upload(SecureRandom.bytes(count: 5000), mime: sync).status == .created)
        for declare in [true, false] {
            let over = await blobs.upload(SecureRandom.bytes(count: (1 << 20) + 1), mime: sync, declareLength: declare)
            #expect(over.status == .contentTooLarge)
        }
        #expect(try blobs.rows() == 3)
        #expect(blobs.files().count == 3)
    }

    @Test func roundTripStoresTheBytesExactly() async throws {
        let blobs = try BlobFixture()
        let body = SecureRandom.bytes(count: 700_000)
        let uploaded = await blobs.upload(body, mime: "application/x-pixie-sync")
        #expect(uploaded.status == .created)
        let blobID = try #require(uploaded.json["blob_id"] as? String)
        let sha256 = Data(SHA256.hash(data: body).rawRepresentation)
        #expect(Data(base64URLEncoded: blobID)?.count == 16)
        #expect(uploaded.json["sha256"] as? String == sha256.base64URLEncodedString())
        #expect(uploaded.json["size_bytes"] as? Int == body.count)
        #expect(uploaded.json["expires_at"] as? Int == Int(blobs.fixture.clock.now.timeIntervalSince1970) + 86_400)

        let downloaded = await blobs.get(blobID)
        #expect(downloaded.status == .ok)
        #expect(Data(SHA256.hash(data: downloaded.body).rawRepresentation) == sha256)
        #expect(downloaded.headers["Content-Type"] == "application/x-pixie-sync")
        #expect(downloaded.headers["Accept-Ranges"] == "bytes")
        #expect(downloaded.headers["ETag"] == "\"\(sha256.base64URLEncodedString())\"")
        let head = await blobs.get(blobID, method: .head)
        #expect(head.status == .ok)
        // The file on disk is the body, byte for byte.
        #expect(try Data(contentsOf: blobs.blobs.appendingPathComponent(blobID)) == body)
    }

    @Test func rangedResumeAndUnsatisfiableRanges() async throws {
        let blobs = try BlobFixture()
        let body = SecureRandom.bytes(count: 300_000)
        let blobID = try #require(await blobs.upload(body, mime: "application/x-pixie-sync").json["blob_id"] as? String)

        let first = await blobs.get(blobID, range: "bytes=0-99999")
        #expect(first.status == .partialContent)
        #expect(first.headers["Content-Range"] == "bytes 0-99999/300000")
        let rest = await blobs.get(blobID, range: "bytes=100000-")
        #expect(rest.status == .partialContent)
        #expect(rest.headers["Content-Range"] == "bytes 100000-299999/300000")
        #expect(first.body + rest.body == body)

        let suffix = await blobs.get(blobID, range: "bytes=-10")
        #expect(suffix.status == .partialContent)
        #expect(suffix.body == body.suffix(10))
        let clamped = await blobs.get(blobID, range: "bytes=299990-999999")
        #expect(clamped.body == body.suffix(10))

        for range in ["bytes=300000-", "bytes=400000-400010", "bytes=-0"] {
            let refused = await blobs.get(blobID, range: range)
            #expect(refused.status == .rangeNotSatisfiable, "\(range)")
            #expect(refused.headers["Content-Range"] == "bytes */300000")
        }
        // Several ranges, another unit or a malformed one: the whole blob.
        for range in ["bytes=0-1,5-9", "items=0-1", "bytes=9-3", "bytes=abc"] {
            let whole = await blobs.get(blobID, range: range)
            #expect(whole.status == .ok, "\(range)")
            #expect(whole.body == body)
        }
    }

    @Test func unknownMalformedAndExpiredIdsAreTheSame404() async throws {
        let blobs = try BlobFixture()
        let unknown = SecureRandom.bytes(count: 16).base64URLEncodedString()
        for blobID in [unknown, "short", "..%2F..%2Fpixie.sqlite", String(repeating: "A", count: 22)] {
            let response = await blobs.get(blobID)
            #expect(response.status == .notFound, "\(blobID)")
            #expect(response.errorCode == "not_found")
        }
        #expect(await blobs.get(unknown, method: .head).status == .notFound)
        #expect(await blobs.fixture.router.test(.delete, "/v1/blobs/\(unknown)").status == .notFound)
    }

    @Test func expiredBlobsAre404AndTheSweeperDeletesThem() async throws {
        let blobs = try BlobFixture()
        let blobID = try #require(await blobs.upload(Data("sealed".utf8)).json["blob_id"] as? String)
        let kept = try #require(await blobs.upload(Data("later".utf8)).json["blob_id"] as? String)
        #expect(try blobs.blob.sweep() == 0)
        blobs.fixture.clock.advance(by: 3600)
        let newer = try #require(await blobs.upload(Data("newer".utf8)).json["blob_id"] as? String)
        blobs.fixture.clock.advance(by: 86_400 - 3600)
        let expired = await blobs.get(blobID)
        #expect(expired.status == .notFound)
        #expect(expired.body == (await blobs.get(SecureRandom.bytes(count: 16).base64URLEncodedString())).body)
        #expect(blobs.files().count == 3)
        #expect(try blobs.blob.sweep() == 2)
        #expect(!blobs.files().contains(blobID))
        #expect(!blobs.files().contains(kept))
        #expect(blobs.files() == [newer])
        #expect(try blobs.rows() == 1)
        #expect(await blobs.get(newer).status == .ok)
    }

    @Test func theSweeperTaskRunsOnItsInterval() async throws {
        let blobs = try BlobFixture { $0.blobSweepInterval = .milliseconds(5) }
        let blobID = try #require(await blobs.upload(Data("sealed".utf8)).json["blob_id"] as? String)
        let sweeper = Task { await blobs.blob.runSweeper() }
        defer { sweeper.cancel() }
        try await Task.sleep(for: .milliseconds(30))
        #expect(blobs.files() == [blobID])
        blobs.fixture.clock.advance(by: 86_401)
        try await eventually("the sweeper did not delete the expired blob") { blobs.files().isEmpty }
        #expect(try blobs.rows() == 0)
    }

    /// What a crash leaves (an upload left midway, bytes with no row) goes once untouched for an hour; the same
    /// left a moment ago stays, since in a directory several nodes share it may be another node's upload in
    /// progress, or a blob whose row is being written.
    @Test func orphansOfInterruptedUploadsAreRemoved() async throws {
        let blobs = try BlobFixture()
        let blobID = try #require(await blobs.upload(Data("sealed".utf8)).json["blob_id"] as? String)
        let temporary = blobs.blobs.appendingPathComponent("tmp/0123.part")
        let orphan = blobs.blobs.appendingPathComponent(SecureRandom.bytes(count: 16).base64URLEncodedString())
        let inProgress = blobs.blobs.appendingPathComponent("tmp/4567.part")  // another node's, say
        let unrecorded = blobs.blobs.appendingPathComponent(SecureRandom.bytes(count: 16).base64URLEncodedString())
        for file in [temporary, orphan, inProgress, unrecorded] { try Data("bytes".utf8).write(to: file) }
        let old = Date().addingTimeInterval(-2 * 3600)
        for file in [temporary, orphan] {
            try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: file.path)
        }
        // The recorded blob stays however old it is.
        try FileManager.default.setAttributes(
            [.modificationDate: old], ofItemAtPath: blobs.blobs.appendingPathComponent(blobID).path)
        #expect(try blobs.blob.removeOrphans() == 2)
        #expect(Set(blobs.files()) == [blobID, unrecorded.lastPathComponent, "tmp/4567.part"])
    }

    @Test func ackDeletesAtOnce() async throws {
        let blobs = try BlobFixture()
        let blobID = try #require(await blobs.upload(Data("sealed".utf8)).json["blob_id"] as? String)
        #expect(await blobs.fixture.router.test(.delete, "/v1/blobs/\(blobID)").status == .noContent)
        #expect(await blobs.get(blobID).status == .notFound)
        #expect(blobs.files().isEmpty)
        #expect(try blobs.rows() == 0)
        #expect(await blobs.fixture.router.test(.delete, "/v1/blobs/\(blobID)").status == .notFound)
    }

    @Test func concurrentUploadsEachKeepTheirBytes() async throws {
        let blobs = try BlobFixture()
        let bodies = (0..<24).map { _ in SecureRandom.bytes(count: Int.random(in: 1...300_000)) }
        let ids = await withTaskGroup(of: (Int, String?).self) { group in
            for (index, body) in bodies.enumerated() {
                group.addTask {
                    let response = await blobs.upload(
                        body, mime: "application/x-pixie-sync", declareLength: index % 2 == 0)
                    return (index, response.json["blob_id"] as? String)
                }
            }
            var ids = [String?](repeating: nil, count: bodies.count)
            for await (index, id) in group { ids[index] = id }
            return ids
        }
        #expect(Set(ids.compactMap { $0 }).count == bodies.count)
        for (id, body) in zip(ids, bodies) {
            #expect(await blobs.get(try #require(id)).body == body)
        }
        #expect(try blobs.rows() == Int64(bodies.count))
    }

    @Test func uploadsNeedASessionOrAToken() async throws {
        let blobs = try BlobFixture(services: PixieConfiguration.Service.allCases) { $0.blobUploadsPerHour = 2 }
        let body = Data("sealed".utf8)
        let none = await blobs.upload(body, authorization: nil)
        #expect(none.status == .unauthorized)
        #expect(await blobs.upload(body, authorization: "Basic dXNlcjpwYXNz").status == .unauthorized)
        #expect(await blobs.upload(body, authorization: "PrivateToken").status == .unauthorized)
        let forged = await blobs.upload(
            body, authorization: "PrivateToken token=\(Data(count: 32).base64URLEncodedString())")
        #expect(forged.status == .unauthorized)
        #expect(forged.errorCode == "token_invalid")
        let token = blobs.token().base64URLEncodedString()
        #expect(await blobs.upload(body, authorization: "PrivateToken token=\"\(token)\"").status == .created)
        let spent = await blobs.upload(body, authorization: "PrivateToken token=\(token)")
        #expect(spent.status == .conflict)
        #expect(spent.errorCode == "token_spent")
        #expect(await blobs.upload(body, authorization: "Bearer not-a-session").status == .unauthorized)

        var phone = TestDevice(name: "phone")
        #expect(try await blobs.fixture.createAccount(&phone).status == .created)
        let session = "Bearer \(try #require(phone.session))"
        #expect(await blobs.upload(body, authorization: session).status == .created)
        #expect(await blobs.upload(body, authorization: session).status == .created)
        let third = await blobs.upload(body, authorization: session)
        #expect(third.status == .tooManyRequests)
        #expect(third.errorCode == "rate_limited")
        // The budget is per clock hour.
        blobs.fixture.clock.advance(by: 3600)
        #expect(await blobs.upload(body, authorization: session).status == .created)
        #expect(try blobs.rows() == 4)
    }

    @Test func sessionByteBudgetRefusesWhatWouldPassIt() async throws {
        let blobs = try BlobFixture(services: PixieConfiguration.Service.allCases) { $0.blobBytesPerHour = 1500 }
        var phone = TestDevice(name: "phone")
        _ = try await blobs.fixture.createAccount(&phone)
        let session = "Bearer \(try #require(phone.session))"
        #expect(await blobs.upload(Data(count: 1000), authorization: session).status == .created)
        #expect(await blobs.upload(Data(count: 600), authorization: session).status == .tooManyRequests)
        let chunked = await blobs.upload(Data(count: 600), declareLength: false, authorization: session)
        #expect(chunked.status == .tooManyRequests)
        #expect(await blobs.upload(Data(count: 500), authorization: session).status == .created)
        #expect(try blobs.rows() == 2)
        #expect(blobs.files().count == 2)
    }

    @Test func aTokenPaidUploadIsAsLargeAsItsTokensBuyAndNoLarger() async throws {
        let blobs = try BlobFixture(services: PixieConfiguration.Service.allCases) { $0.blobBytesPerToken = 100 }
        let header = { (tokens: [Data]) in
            "PrivateToken " + tokens.map { "token=\($0.base64URLEncodedString())" }.joined(separator: ", ")
        }
        // Declared past what one token buys: refused before the token is spent, so it still pays for less.
        let token = blobs.token()
        let declared = await blobs.upload(Data(count: 150), authorization: header([token]))
        #expect(declared.status == .tooManyRequests)
        #expect(declared.errorCode == "rate_limited")
        #expect(declared.bodyText.contains("1 token buys 100 bytes"), "\(declared.bodyText)")
        #expect(await blobs.upload(Data(count: 100), authorization: header([token])).status == .created)
        // Not declared: cut off once the body passes the budget, and nothing is kept.
        let streamed = await blobs.upload(
            Data(count: 150), declareLength: false, authorization: header([blobs.token()]))
        #expect(streamed.status == .tooManyRequests)
        #expect(try blobs.rows() == 1)
        #expect(blobs.files().count == 1)
        // Two tokens buy twice as much.
        let two = await blobs.upload(Data(count: 150), authorization: header([blobs.token(), blobs.token()]))
        #expect(two.status == .created)
        // A whole-store snapshot cannot be paid for with tokens: 64 of them buy 6400 bytes here.
        let snapshot = Data(count: 10_000)
        let most = (0..<BlobService.maximumTokensPerUpload).map { _ in blobs.token() }
        let paid = await blobs.upload(snapshot, mime: BlobService.syncMimeType, authorization: header(most))
        #expect(paid.status == .tooManyRequests)
        let tooMany = (0...BlobService.maximumTokensPerUpload).map { _ in blobs.token() }
        #expect(await blobs.upload(Data(count: 1), authorization: header(tooMany)).status == .badRequest)
        // With a session, within its account's hour, it can.
        var phone = TestDevice(name: "phone")
        _ = try await blobs.fixture.createAccount(&phone)
        let session = "Bearer \(try #require(phone.session))"
        #expect(await blobs.upload(snapshot, mime: BlobService.syncMimeType, authorization: session).status == .created)
        #expect(try blobs.rows() == 3)
    }

    @Test func blobAloneTakesTokensButNoSessions() async throws {
        let blobs = try BlobFixture(services: [.blob])
        let response = await blobs.upload(
            Data("x".utf8), authorization: "Bearer \(Data(count: 32).base64URLEncodedString())")
        #expect(response.status == .unauthorized)
        #expect(await blobs.upload(Data("x".utf8)).status == .created)
    }

    @Test func theContentTypeIsRequiredAndChecked() async throws {
        let blobs = try BlobFixture()
        for mime in ["", "nonsense", "text/plain\r\nX-Evil: 1", "a/b/c"] {
            #expect(await blobs.upload(Data("x".utf8), mime: mime).status == .unsupportedMediaType, "\(mime)")
        }
        #expect(try blobs.rows() == 0)
    }

    @Test func metricsLabelTheRouteNotTheBlobID() async throws {
        let blobs = try BlobFixture()
        let blobID = try #require(await blobs.upload(Data("sealed".utf8)).json["blob_id"] as? String)
        _ = await blobs.get(blobID)
        let text = (await blobs.fixture.get("/metrics")).bodyText
        #expect(text.contains(#"route="/v1/blobs/:blob_id",status="200""#))
        #expect(!text.contains(blobID))
    }

    @Test func theBlobSettingsParseFromEverySource() throws {
        var configuration = PixieConfiguration()
        #expect(configuration.services.contains(.blob))
        try configuration.apply(environment: ["PIXIE_BLOB_TTL": "600", "PIXIE_SYNC_MAX_BLOB_BYTES": "1024"])
        try configuration.set("blob_max_bytes", "2048", source: "--blob-max-bytes")
        try configuration.set("blob_sweep_interval", "5", source: "--blob-sweep-interval")
        try configuration.set("blob_uploads_per_hour", "7", source: "--blob-uploads-per-hour")
        try configuration.set("blob_bytes_per_hour", "4096", source: "--blob-bytes-per-hour")
        try configuration.set("blob_bytes_per_token", "512", source: "--blob-bytes-per-token")
        try configuration.set("services", "blob", source: "--services")
        #expect(configuration.blobTTL == 600)
        #expect(configuration.syncMaxBlobBytes == 1024)
        #expect(configuration.blobMaxBytes == 2048)
        #expect(configuration.blobSweepInterval == .seconds(5))
        #expect(configuration.blobUploadsPerHour == 7)
        #expect(configuration.blobBytesPerHour == 4096)
        #expect(configuration.blobBytesPerToken == 512)
        #expect(configuration.services == [.blob])
        #expect(!configuration.blobAllowAnonymousUploads)
        for (name, value) in [("blob_ttl", "0"), ("blob_max_bytes", "-1"), ("blob_allow_anonymous_uploads", "yes")] {
            #expect(throws: ServerError.self) { try configuration.set(name, value, source: "test") }
        }
        #expect(PixieConfiguration.settings.contains { $0.name == "blob_sweep_interval" })
    }
}
