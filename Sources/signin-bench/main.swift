import CommandLineKit
import Foundation
import PixieDevice
import PixieWire
import Synchronization

/// `signin-bench`: the machine path of a sign-in against a running pixie-server, as a device makes it (the SDK's
/// OnboardingFlow on the new device, a InboxListener on the sibling that approves at once), beside the HTTP
/// exchanges of that path as its own transport timed them; then sign-ins per second with several at once,
/// beside the server's `POST /v1/discovery/own` rate in the same run. scripts/bench-signin.sh starts the server
/// and runs this; docs/benchmarks.md records a run.
///
/// Each sign-in is one account: a number may be sent only 5 SMS codes an hour, and every account here takes two
/// (its first device, then the new one).
struct SignInBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signin-bench",
        abstract: "A sign-in's machine path in ms, and sign-ins per second beside discovery/own per second.")

    @Option(name: .long("server"), help: "The pixie-server, http://127.0.0.1:PORT or https://localhost:PORT.")
    var server: String
    @OptionalOption(name: .long("ca-file"), help: "For an https:// server: trust only the CA certificates in this PEM.")
    var caFile: String?
    @Option(name: .long("trust-bundle"), help: "Its trust bundle (pixie-server trust-bundle).") var trustBundle: String
    @Option(name: .long("sms-outbox"), help: "Its development SMS outbox (<data_dir>/sms-outbox.jsonl).")
    var smsOutbox: String
    @Option(name: .long("count"), help: "Sign-ins timed one at a time (default 10).") var count: Int = 10
    @Option(name: .long("parallel"), help: "Sign-ins at once for the rate (default 4).") var parallel: Int = 4
    @Option(name: .long("rate-count"), help: "Sign-ins for the rate (default 24).") var rateCount: Int = 24
    @Option(name: .long("prefix"), help: "Phone numbers used: PREFIX followed by 4 digits (default +1628555).")
    var prefix: String = "+1628555"
    @OptionalOption(
        name: .long("revocation"),
        help:
            "Instead of the sign-in tables: revoke one device of accounts with these many remaining siblings (3,10,50)."
    )
    var revocation: String?

    func validate() throws {
        guard count >= 1, parallel >= 1, rateCount >= parallel, count + rateCount <= 9999 else {
            throw ValidationError("--count and --parallel at least 1, --rate-count at least --parallel")
        }
    }

    func run() async throws {
        let server = URL(string: server)!
        let bundle = try JSONDecoder().decode(
            TrustBundle.self, from: try Data(contentsOf: URL(fileURLWithPath: trustBundle)))
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("signin-bench-\(UUID())")
        defer { try? FileManager.default.removeItem(at: work) }
        let environment = DeviceEnvironment(tls: .client(trust: caFile.map { .caFile($0) } ?? .system))
        let world = World(
            server: server, bundle: bundle, outbox: smsOutbox, work: work, prefix: prefix, environment: environment)
        if let revocation {
            let sizes = revocation.split(separator: ",").compactMap { Int($0) }
            guard !sizes.isEmpty, sizes.allSatisfy({ $0 >= 2 }) else {
                throw ValidationError("--revocation takes sibling counts of 2 or more, like 3,10,50")
            }
            var runs: [RevocationRun] = []
            for (index, size) in sizes.enumerated() {
                runs.append(try await world.revocation(siblings: size, index: index))
            }
            printRevocation(runs)
            return
        }

        // One at a time: where the time goes.
        let accounts = try await world.accounts(0..<count, parallel: 1)
        var paths: [Path] = []
        for account in accounts { paths.append(try await world.signIn(account)) }
        world.stopListening()

        // Several at once: sign-ins per second, and the discovery lookup's rate beside it.
        let more = try await world.accounts(count..<(count + rateCount), parallel: parallel)
        let queue = Locked(more[...])
        let started = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<parallel {
                group.addTask {
                    while let account = queue.withLock({ $0.popFirst() }) { _ = try await world.signIn(account) }
                }
            }
            try await group.waitForAll()
        }
        let signInsPerSecond = Double(rateCount) / (ContinuousClock.now - started).seconds
        world.stopListening()
        let lookups = try await world.discoveryRate(phoneCert: more[more.startIndex].phoneCert, parallel: parallel)

        func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
        func ms(_ value: Double) -> String { String(format: "%.1f ms", value * 1000) }
        let whole = median(paths.map(\.whole))
        let http = median(paths.map(\.http))
        print("| sign-in, one at a time (median of \(count)) | time |")
        print("|---|---:|")
        print(
            "| phone verified, discovery checked in the log, tokens minted, reply subject subscribed | \(ms(median(paths.map(\.toRequest)))) |"
        )
        print(
            "| request sent → prompt on the sibling (ladder passed, ack sent) | \(ms(median(paths.map(\.toPrompt)))) |")
        print(
            "| Approve → grant minted, approval sealed, seed checked and adopted, enrolled, roster checked | \(ms(median(paths.map(\.toEnrolled)))) |"
        )
        print("| **whole machine path** | **\(ms(whole))** |")
        print("| its \(paths[0].exchanges) HTTP exchanges, each as the transport timed it, summed | \(ms(http)) |")
        print("| whole path / HTTP exchanges | \(String(format: "%.2f", whole / http)) |")
        print()
        print("| \(parallel) at once | per second |")
        print("|---|---:|")
        print("| sign-ins (\(rateCount), each a whole machine path) | \(String(format: "%.1f", signInsPerSecond)) |")
        print("| POST /v1/discovery/own (\(lookups.calls) calls) | \(String(format: "%.0f", lookups.perSecond)) |")
        print("| sign-ins / discovery lookups | \(String(format: "%.4f", signInsPerSecond / lookups.perSecond)) |")
    }
}

/// One sign-in's times, in seconds.
struct Path {
    var toRequest: Double
    var toPrompt: Double
    var toEnrolled: Double
    var whole: Double { toRequest + toPrompt + toEnrolled }
    /// The sum of its HTTP exchanges' own times, and how many there were.
    var http: Double
    var exchanges: Int
}

/// An account made for one sign-in: its first device, listening.
struct Account: Sendable {
    let index: Int
    let number: String
    let home: DeviceHome
    let phoneCert: Data
    let prompted: Moment
    let code: Mailbox
}

final class World: Sendable {
    let server: URL
    let bundle: TrustBundle
    let outbox: String
    let work: URL
    let prefix: String
    /// The devices' network: whom they trust for an https:// server.
    let environment: DeviceEnvironment
    private let listeners = Mutex<[Task<Void, any Error>]>([])

    init(server: URL, bundle: TrustBundle, outbox: String, work: URL, prefix: String, environment: DeviceEnvironment) {
        self.server = server
        self.environment = environment
        self.bundle = bundle
        self.outbox = outbox
        self.work = work
        self.prefix = prefix
    }

    var codes: OnboardingFlow.CodeSource {
        let outbox = outbox
        return { number, _ in
            guard let code = try await DevelopmentOutbox.waitForCode(at: outbox, to: number) else {
                throw BenchError("no SMS code to \(number) in \(outbox)")
            }
            return code
        }
    }

    /// Accounts `indices`, made `parallel` at a time, each with a listener that approves as soon as it is asked.
    func accounts(_ indices: Range<Int>, parallel: Int) async throws -> [Account] {
        let queue = Locked(indices[...])
        let made = Locked<[Account]>([])
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<parallel {
                group.addTask { [self] in
                    while let index = queue.withLock({ $0.popFirst() }) {
                        let account = try await makeAccount(index)
                        made.withLock { $0.append(account) }
                    }
                }
            }
            try await group.waitForAll()
        }
        return made.withLock { $0 }.sorted { $0.index < $1.index }
    }

    private func makeAccount(_ index: Int) async throws -> Account {
        let number = prefix + String(format: "%04d", index)
        let home = try DeviceHome(directory: work.appendingPathComponent("sibling-\(index)"))
        let state = try await OnboardingFlow(home: home, environment: environment).createAccount(
            server: server, trustBundle: bundle, name: "sibling \(index)", phoneNumber: number, code: codes)
        let account = Account(
            index: index, number: number, home: home, phoneCert: state.phoneCert.data, prompted: Moment(),
            code: Mailbox())
        let ready = Mailbox()
        let listener = Task {
            try await InboxListener(
                context: try DeviceContext(home: home, environment: environment), deviceFamily: "bench"
            ).run(
                ready: { ready.put("ready") },
                decide: { _ in
                    account.prompted.mark()
                    return .approve(checkCode: await account.code.take())
                })
        }
        listeners.withLock { $0.append(listener) }
        _ = await ready.take()
        return account
    }

    func stopListening() { listeners.withLock { $0.forEach { $0.cancel() } } }

    /// One sign-in of a new device into `account`, timed.
    func signIn(_ account: Account) async throws -> Path {
        try await signIn(
            account, into: try DeviceHome(directory: work.appendingPathComponent("new-\(account.index)")),
            name: "new \(account.index)")
    }

    /// One sign-in of the device at `home`, named `name`, into `account`, timed.
    func signIn(_ account: Account, into home: DeviceHome, name: String) async throws -> Path {
        let timing = Timing()
        let requested = Moment()
        let flow = OnboardingFlow(
            home: home,
            environment: DeviceEnvironment(
                transport: { [environment] in
                    TimingTransport(inner: SocketHTTPTransport(baseURL: $0, tls: environment.tls), timing: timing)
                }, tls: environment.tls))
        let start = ContinuousClock.now
        _ = try await flow.signIn(
            server: server, trustBundle: bundle, name: name, phoneNumber: account.number, code: codes,
            configuration: .init(deviceModel: "bench device")
        ) { event in
            if case .waiting(let code) = event {
                requested.mark()
                account.code.put(code)
            }
        }
        let end = ContinuousClock.now
        let request = try requested.instant, prompt = try account.prompted.instant
        return Path(
            toRequest: (request - start).seconds, toPrompt: (prompt - request).seconds,
            toEnrolled: (end - prompt).seconds, http: timing.total, exchanges: timing.count)
    }

    /// `POST /v1/discovery/own` with one cached cert, `parallel` at a time: calls per second.
    func discoveryRate(phoneCert: Data, parallel: Int) async throws -> (calls: Int, perSecond: Double) {
        let calls = 400 * parallel
        let remaining = Locked(calls)
        let client = PixieClient(transport: environment.transport(server))
        _ = try await client.lookupOwnDiscovery(phoneCert: phoneCert)
        let started = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<parallel {
                group.addTask {
                    while remaining.withLock({ left -> Bool in
                        left -= 1
                        return left >= 0
                    }) {
                        _ = try await client.lookupOwnDiscovery(phoneCert: phoneCert)
                    }
                }
            }
            try await group.waitForAll()
        }
        return (calls, Double(calls) / (ContinuousClock.now - started).seconds)
    }
}

/// A value behind a lock, shared by reference between tasks.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<T: Sendable>(_ body: (inout Value) -> T) -> T { mutex.withLock { body(&$0) } }
}

/// Every HTTP exchange's own time.
final class Timing: Sendable {
    private let times = Mutex<[Double]>([])
    func add(_ seconds: Double) { times.withLock { $0.append(seconds) } }
    var total: Double { times.withLock { $0.reduce(0, +) } }
    var count: Int { times.withLock { $0.count } }
}

struct TimingTransport: HTTPTransport {
    let inner: any HTTPTransport
    let timing: Timing

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        let start = ContinuousClock.now
        defer { timing.add((ContinuousClock.now - start).seconds) }
        return try await inner.send(request)
    }
}

/// When something happened, once.
final class Moment: Sendable {
    private let value = Mutex<ContinuousClock.Instant?>(nil)
    func mark() { value.withLock { $0 = $0 ?? .now } }
    var instant: ContinuousClock.Instant {
        get throws {
            guard let instant = value.withLock({ $0 }) else { throw BenchError("a step of the sign-in never happened") }
            return instant
        }
    }
}

/// One value handed from one task to another.
final class Mailbox: Sendable {
    private let state = Mutex<(value: String?, waiter: CheckedContinuation<String, Never>?)>((nil, nil))

    func put(_ value: String) {
        let waiter = state.withLock { state -> CheckedContinuation<String, Never>? in
            guard let waiter = state.waiter else {
                state.value = value
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume(returning: value)
    }

    func take() async -> String {
        await withCheckedContinuation { continuation in
            let value = state.withLock { state -> String? in
                guard let value = state.value else {
                    state.waiter = continuation
                    return nil
                }
                state.value = nil
                return value
            }
            if let value { continuation.resume(returning: value) }
        }
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension Duration {
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

await SignInBench.main()
