import Foundation
import HTTPServer
@_spi(Testing) import PixieServer
import PixieWire
import SiblingsCrypto
import SiblingsTestSupport
import Storage
import Synchronization

/// Records every SMS instead of sending it; can be told to fail.
final class RecordingSMSSender: SMSSender {
    private let sent = Mutex<[(number: String, text: String)]>([])
    let failing = Mutex(false)

    func send(_ text: String, to number: PhoneNumber) async throws(ServerError) {
        if failing.withLock({ $0 }) { throw ServerError(.upstream, "the test gateway is down") }
        sent.withLock { $0.append((number.e164, text)) }
    }

    var messages: [(number: String, text: String)] { sent.withLock { $0 } }

    /// The six digits of the last message to `number`.
    func lastCode(to number: String) -> String? {
        guard let text = messages.last(where: { $0.number == number })?.text else { return nil }
        let words = text.split(separator: " ").map { String($0.filter(\.isNumber)) }
        return words.first { $0.count == 6 }
    }
}

/// A fresh directory under the system's temporary directory, removed with the last reference to it.
final class TemporaryDirectory: Sendable {
    let url: URL

    init() throws { url = try ServerProcess.temporaryDirectory() }

    deinit { try? FileManager.default.removeItem(at: url) }
}

/// One in-process pixie-server on an in-memory store with a manual clock. Its data directory (blob files)
/// is a fresh temporary one unless `configure` sets another: never `pixie-data` in the working directory.
struct Fixture {
    let clock: ManualClock
    let dataDirectory = try! TemporaryDirectory()
    let sms = RecordingSMSSender()
    let keys: ServiceKeys
    let database: any SQLDatabase
    let application: Application
    var router: Router { application.router }

    /// How many blobs blob-svc holds (its committed files in `<data>/blobs`).
    func blobCount() -> Int {
        let blobs = dataDirectory.url.appendingPathComponent("blobs")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: blobs.path)) ?? []
        return names.filter { $0 != "tmp" }.count
    }

    init(
        services: [PixieConfiguration.Service] = PixieConfiguration.Service.allCases, pinned: Bool = true,
        tokens: (any TokenSpender)? = nil, random: any SecureRandomSource = SystemRandom(),
        configure: (inout PixieConfiguration) -> Void = { _ in },
        faults: ((any SQLDatabase) -> FaultyDatabase)? = nil,
        store: (any SQLDatabase)? = nil, keys: ServiceKeys = .generate(),
        start: Date = Date(timeIntervalSince1970: 1_800_000_000), bus: any RelayBus = InProcessRelayBus()
    ) throws {
        self.clock = ManualClock(start)
        self.keys = keys
        var configuration = PixieConfiguration()
        configuration.checkpointInterval = .milliseconds(1)
        configuration.dataDirectory = dataDirectory.url.path
        configure(&configuration)
        configuration.services = services
        if !pinned, services.contains(.phoneVerify) {
            fatalError("a fixture with phone-verify always pins its own key")
        }
        if pinned, !services.contains(.phoneVerify) {
            configuration.phoneVerifyKeys = [keys.phoneVerify.publicKey]
        }
        // `store` (with the `keys` it was made under) is an existing server's store, restarted, or a PostgreSQL
        // one (TestDatabase.postgres).
        let store = try store ?? Self.defaultStore()
        database = store
        // With `faults`, the application's statements go through a FaultyDatabase the test can switch.
        let served: any SQLDatabase = faults.map { $0(store) } ?? store
        application = try Application(
            configuration: configuration, keys: keys, database: served, sms: sms, clock: clock.clock,
            random: random, logger: .discard, tokens: tokens, bus: bus)
    }

    /// A new store of the backend `$SIBLINGS_SERVICE_DATABASE` names: `postgres` (scripts/test.sh runs the service
    /// suite a second time so), or SQLite in memory by default.
    static func defaultStore() throws -> any SQLDatabase {
        let backend = ProcessInfo.processInfo.environment["SIBLINGS_SERVICE_DATABASE"].flatMap(TestDatabase.init)
        return try (backend ?? .sqlite).make()
    }

    func post(_ path: String, _ json: String, token: String? = nil) async -> HTTPResponse {
        var headers: HTTPHeaders = ["Content-Type": "application/json"]
        if let token { headers["Authorization"] = "Bearer \(token)" }
        return await router.test(.post, path, headers: headers, body: json)
    }

    func post(_ path: String, object: [String: Any], token: String? = nil) async -> HTTPResponse {
        let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        return await post(path, String(decoding: data, as: UTF8.self), token: token)
    }

    func get(_ path: String, token: String? = nil) async -> HTTPResponse {
        var headers = HTTPHeaders()
        if let token { headers["Authorization"] = "Bearer \(token)" }
        return await router.test(.get, path, headers: headers)
    }

    /// Runs phone verification for `number` and returns the cert bytes.
    func phoneCert(for number: String = "+14155550123") async throws -> Data {
        let start = await post("/v1/phone/verifications", object: ["phone_number": number])
        guard start.status == .created, let id = start.json["verification_id"] as? String,
            let code = sms.lastCode(to: try PhoneNumber(number).e164)
        else { throw FixtureError("phone verification did not start: \(start.bodyText)") }
        let check = await post("/v1/phone/verifications/check", object: ["verification_id": id, "code": code])
        guard check.status == .ok,
            let cert = (check.json["phone_cert"] as? String).flatMap(Data.init(base64URLEncoded:))
        else { throw FixtureError("phone verification did not finish: \(check.bodyText)") }
        return cert
    }

    /// Rows in `table`, to prove a refused request stored nothing.
    func count(_ table: String) throws -> Int64 {
        try database.queryOne("SELECT COUNT(*) AS n FROM \(table)", [])?.int64("n") ?? -1
    }
}

struct FixtureError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension HTTPResponse {
    /// The body as a JSON object (empty when it is not one).
    var json: [String: Any] { (try? JSONSerialization.jsonObject(with: body) as? [String: Any]) ?? [:] }
    /// The `error` code of a JSON error body.
    var errorCode: String? { json["error"] as? String }
}
