import CommandLineKit
import Foundation
import PixieDevice
import PrivateFiles
import Processes
import Synchronization
import SystemCalls

#if canImport(Glibc)
    import Glibc
#endif

/// Where a device's absorption runs and says how far it is, in `<home>/sync/` (docs/pixie-device.md, "Absorbing
/// in the background"):
///
/// - `events.jsonl`: one JSON object a line, the same ones `pixie sync --json` prints, each with `run` (the run's
///   ID) and `at` (Unix seconds); written by the worker, emptied as a run starts.
/// - `worker.lock`: held (`flock(2)`) by the worker for as long as it runs, so a second `pixie sync` watches the
///   run under way instead of starting another, and `pixie sync status` tells a running worker from one that died.
/// - `worker.log`: the worker's own standard output and error.
struct SyncRunFiles {
    let home: DeviceHome
    var directory: URL { home.directory.appendingPathComponent("sync") }
    var events: URL { directory.appendingPathComponent("events.jsonl") }
    var lock: URL { directory.appendingPathComponent("worker.lock") }
    var log: URL { directory.appendingPathComponent("worker.log") }

    /// The outcomes that end a run.
    static let finalEvents: Set<String> = ["absorbed", "no_siblings", "no_answer", "refused", "failed"]

    func makeDirectory() throws {
        do {
            try PrivateFiles.createDirectory(directory, noun: "the device's sync folder")
        } catch {
            throw DeviceError.home(error.reason)
        }
    }

    /// Takes the worker's lock, kept until the descriptor returned is closed or the process ends; nil if another
    /// process holds it for a second (a watcher or `pixie sync status` testing it holds it only for a moment).
    func takeLock() throws -> Int32? {
        let descriptor = open(lock.path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw DeviceError.home("cannot open \(lock.path): \(String(cString: strerror(errno)))")
        }
        var tries = 0
        while retryingInterrupts({ flock(descriptor, LOCK_EX | LOCK_NB) }) != 0 {
            tries += 1
            guard tries < 50 else {
                close(descriptor)
                return nil
            }
            usleep(20_000)
        }
        return descriptor
    }

    /// Whether a worker holds the lock now.
    var isRunning: Bool {
        let descriptor = open(lock.path, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        if retryingInterrupts({ flock(descriptor, LOCK_EX | LOCK_NB) }) != 0 { return true }
        flock(descriptor, LOCK_UN)
        return false
    }

    /// The records of the events file, in order (a line cut short by a writer that is still writing is left out).
    func records() -> [[String: Any]] {
        guard let data = try? PrivateFiles.read(events, noun: "the sync events") else { return [] }
        return Self.records(in: data).records
    }

    /// The whole lines of `data` as JSON objects, and how many bytes they took.
    static func records(in data: Data) -> (records: [[String: Any]], consumed: Int) {
        var records: [[String: Any]] = []
        var start = data.startIndex
        while let newline = data[start...].firstIndex(of: UInt8(ascii: "\n")) {
            if let object = try? JSONSerialization.jsonObject(with: data[start..<newline]) as? [String: Any] {
                records.append(object)
            }
            start = newline + 1
        }
        return (records, start - data.startIndex)
    }
}

/// Writes the worker's records, one whole line at a time.
final class SyncEventWriter: Sendable {
    private let handle: FileHandle
    private let run: String
    private let lock = Mutex(())

    init(files: SyncRunFiles, run: String) throws {
        let path = files.events.path
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw DeviceError.home("cannot write \(path): \(String(cString: strerror(errno)))")
        }
        handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        self.run = run
    }

    func write(_ record: [String: Any]) {
        var record = record
        record["run"] = run
        record["at"] = Date().timeIntervalSince1970
        guard
            var line = try? JSONSerialization.data(
                withJSONObject: record, options: [.sortedKeys, .withoutEscapingSlashes])
        else { return }
        line.append(UInt8(ascii: "\n"))
        lock.withLock { _ in try? handle.write(contentsOf: line) }
    }
}

/// `pixie sync worker`: the absorption itself, which `pixie sync` and `pixie signin` start in a process of its own,
/// so that it goes on once the person continues without the store (the seed's thirty-second grace).
struct SyncWorker: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "worker",
        abstract: "Run one absorption, recording its progress in <home>/sync (started by `pixie sync`).",
        discussion: "Not for people: `pixie sync` starts it, watches it, and leaves it running if you continue "
            + "without the store. It leaves the terminal's session, so Ctrl-C there does not reach it.")

    @Option(name: .long("home"), help: "This device's directory.") var home: String
    @Option(name: .long("run"), help: "The run's ID, as its records carry it.") var run: String
    @Option(name: .long("grace"), help: "Seconds before the person may continue without the store.")
    var grace: Double = 30

    func validate() throws {
        guard grace > 0, grace <= 3600 else { throw ValidationError("--grace must be more than 0, at most 3600") }
        guard !run.isEmpty, run.count <= 64, run.allSatisfy({ $0.isHexDigit }) else {
            throw ValidationError("--run is the run's ID in hex")
        }
    }

    func run() async throws {
        // Out of the terminal's session: Ctrl-C and a closed terminal reach `pixie sync`, not this.
        _ = setsid()
        signal(SIGPIPE, SIG_IGN)
        let home = try openHome(self.home)
        let files = SyncRunFiles(home: home)
        try files.makeDirectory()
        guard let lock = try files.takeLock() else {
            throw failure("another absorption is running for \(self.home); `pixie sync status` shows it")
        }
        let writer = try SyncEventWriter(files: files, run: run)
        writer.write(["event": "started", "pid": Int(getpid())])
        var configuration = SyncService.Configuration()
        configuration.grace = .milliseconds(Int64((grace * 1000).rounded()))
        let recorder = SyncRecorder()
        do {
            let service = try await SyncService.connect(
                context: try DeviceContext(home: home, environment: deviceEnvironment(home)),
                configuration: configuration)
            let outcome: SyncService.Outcome
            // The person may continue without the store at the grace: a round with the online siblings starts
            // filling it in meanwhile (docs/pixie-sync.md, "When a round starts").
            let early = Mutex<Task<Void, Never>?>(nil)
            do {
                outcome = try await service.absorb { event in
                    writer.write(recorder.record(for: event))
                    if case .mayContinue = event {
                        early.withLock { $0 = Task { await roundAfterAbsorbing(home: home, show: writer.write) } }
                    }
                }
            } catch {
                await service.close()
                throw error
            }
            await service.close()
            writer.write(SyncRecorder.record(for: outcome))
            await early.withLock { $0 }?.value
            // The absorption is over: the next `pixie sync` may start one. What reached the sibling while its
            // snapshot was made and sent comes now, in a reconcile round (its records carry this run's id, so a
            // new run's status never mixes them in).
            close(lock)
            if case .absorbed = outcome { await roundAfterAbsorbing(home: home, show: writer.write) }
            switch outcome {
            case .absorbed, .noSiblings: return
            case .noAnswer, .refused: throw ExitCode.failure
            }
        } catch let error as ExitCode {
            throw error
        } catch {
            writer.write(["event": "failed", "reason": "\(error)"])
            throw failure("\(error)")
        }
    }
}

/// One reconcile round with every online sibling after an absorption (or at its grace), its rounds shown as records
/// (`round`, `reconciled`, `round_failed`); a failure is recorded, not thrown: the store is absorbed either way.
func roundAfterAbsorbing(home: DeviceHome, show: @escaping @Sendable ([String: Any]) -> Void) async {
    do {
        let service = try await SyncService.connect(
            context: try DeviceContext(home: home, environment: deviceEnvironment(home)))
        let ended: [SyncLoop.Summary]
        do {
            ended = try await service.reconcile(patience: .seconds(10)).ended
        } catch {
            await service.close()
            throw error
        }
        await service.close()
        for round in ended { show(roundRecord(round, names: [:])) }
        show([
            "event": "reconciled", "siblings": ended.count, "rows_in": ended.reduce(0) { $0 + $1.rowsApplied },
            "rows_out": ended.reduce(0) { $0 + $1.rowsSent },
        ])
    } catch {
        show(["event": "round_failed", "reason": "\(error)"])
    }
}

/// SyncService's events as the records `pixie sync --json` prints and the worker keeps.
final class SyncRecorder: Sendable {
    private let downloadStart = Mutex<Date?>(nil)

    func record(for event: SyncService.Event) -> [String: Any] {
        switch event {
        case .requesting(let siblings, let attempt):
            return ["event": "requesting", "siblings": siblings, "attempt": attempt]
        case .mayContinue:
            return ["event": "may_continue"]
        case .preparing(let estimated, let done):
            return ["event": "preparing", "estimated_bytes": estimated, "done_bytes": done]
        case .siblingFailed(let kind, let reason):
            return ["event": "sibling_failed", "kind": "\(kind)", "reason": reason]
        case .downloading(let done, let total):
            let now = Date()
            let start = downloadStart.withLock { start -> Date in
                if start == nil { start = now }
                return start!
            }
            let elapsed = max(now.timeIntervalSince(start), 0.001)
            let rate = Double(done) / elapsed
            let secondsLeft = rate > 0 ? Int((Double(total - done) / rate).rounded(.up)) : 0
            return [
                "event": "downloading", "done_bytes": done, "total_bytes": total, "bytes_per_second": Int(rate),
                "seconds_left": secondsLeft,
            ]
        case .importing:
            return ["event": "importing"]
        case .dropped(let reason):
            return ["event": "dropped", "reason": reason]
        }
    }

    static func record(for outcome: SyncService.Outcome) -> [String: Any] {
        switch outcome {
        case .absorbed(let summary):
            ["event": "absorbed", "rows": summary.rows, "inserted": summary.inserted, "present": summary.present]
        case .noSiblings: ["event": "no_siblings"]
        case .noAnswer: ["event": "no_answer"]
        case .refused(let reasons): ["event": "refused", "reasons": reasons]
        }
    }
}

/// How an absorption watched from the terminal ended.
enum WatchedAbsorption {
    /// The run's final record.
    case ended([String: Any])
    /// The person continued without the store; the worker (this process ID) goes on.
    case continued(pid: Int)
}

/// Starts the worker for `home` (or finds the one running) and shows its records as they come: every one as a JSON
/// line, or as text. At `may_continue` the person may continue without the store (a line typed; `continueAtGrace`
/// does it for scripts); the worker goes on, and `pixie sync status` shows it. Ctrl-C stops the worker.
func watchAbsorption(
    home: DeviceHome, homePath: String, json: Bool, grace: Double, continueAtGrace: Bool
) async throws -> WatchedAbsorption {
    let files = SyncRunFiles(home: home)
    try files.makeDirectory()
    var run: String
    var worker: ChildProcess?
    if files.isRunning, let first = files.records().first, let running = first["run"] as? String {
        run = running
        if !json { streams.out("An absorption is already running for this device; showing it.") }
    } else {
        run = SecureRandomHex.make()
        let child = ChildProcess()
        child.executableURL = ownExecutable()
        child.arguments = ["sync", "worker", "--home", homePath, "--run", run, "--grace", "\(grace)"]
        child.standardInput = FileHandle.nullDevice
        let descriptor = open(files.log.path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw DeviceError.home("cannot write \(files.log.path): \(String(cString: strerror(errno)))")
        }
        let log = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        child.standardOutput = log
        child.standardError = log
        try child.run()
        worker = child
    }
    let printer = RecordPrinter(json: json)
    let offered = Mutex(false)
    // What the person did, set by the line reader (continue) or Ctrl-C (stop), read by the loop below.
    let decided = Mutex(Decision.none)
    let interrupt = onInterrupt { decided.withLock { $0 = .stop } }
    defer { interrupt.cancel() }
    let reading = Task {
        // A line typed once continuing is offered continues; lines before it are dropped.
        while let _ = await readLineAsync() {
            if offered.withLock({ $0 }) {
                decided.withLock { if $0 == .none { $0 = .continue } }
                return
            }
        }
    }
    defer { reading.cancel() }
    var offset = 0
    var pid = 0
    let started = Date()
    var sawStart = false
    while true {
        let data = (try? PrivateFiles.read(files.events, noun: "the sync events")) ?? Data()
        if data.count < offset {
            // Emptied by a new run.
            offset = 0
        }
        if data.count > offset {
            let (records, consumed) = SyncRunFiles.records(in: data.dropFirst(offset))
            offset += consumed
            for record in records where record["run"] as? String == run {
                let event = record["event"] as? String ?? ""
                if event == "started" {
                    sawStart = true
                    pid = record["pid"] as? Int ?? 0
                    continue
                }
                printer.show(record)
                if SyncRunFiles.finalEvents.contains(event) { return .ended(record) }
                if event == "may_continue" {
                    offered.withLock { $0 = true }
                    if continueAtGrace { decided.withLock { if $0 == .none { $0 = .continue } } }
                }
            }
        }
        if !sawStart, worker?.isRunning == false {
            let log = (try? String(contentsOf: files.log, encoding: .utf8))?.split(separator: "\n").last.map(
                String.init)
            throw DeviceError.notSetUp(
                "the absorption could not start" + (log.map { ": \($0)" } ?? "") + " (its log: \(files.log.path))")
        }
        if !sawStart, Date().timeIntervalSince(started) > 60 {
            throw DeviceError.notSetUp("the absorption did not start within 60 s; its log: \(files.log.path)")
        }
        if sawStart, !files.isRunning, worker?.isRunning != true {
            // The worker is gone: one last read for its final record, then it stopped without one.
            let data = (try? PrivateFiles.read(files.events, noun: "the sync events")) ?? nil
            if let data, data.count > offset {
                let (records, _) = SyncRunFiles.records(in: data.dropFirst(offset))
                for record in records where record["run"] as? String == run {
                    printer.show(record)
                    if let event = record["event"] as? String, SyncRunFiles.finalEvents.contains(event) {
                        return .ended(record)
                    }
                }
            }
            throw DeviceError.notSetUp(
                "the absorption stopped before it ended (its log: \(files.log.path)); what was downloaded is kept: "
                    + "run `pixie sync retry --home \(homePath)` to go on")
        }
        switch decided.withLock({ $0 }) {
        case .continue:
            if json {
                try printJSON(["event": "continued", "pid": pid])
            } else {
                streams.out(
                    "Continuing without the store: it keeps coming in the background (process \(pid)); "
                        + "`pixie sync status --home \(homePath)` shows how far it is.")
            }
            return .continued(pid: pid)
        case .stop:
            if pid > 0 { kill(pid_t(pid), SIGTERM) }
            worker?.terminate()
            throw failure(
                "stopped: the absorption was interrupted. What was downloaded is kept; `pixie sync retry --home "
                    + "\(homePath)` goes on")
        case .none:
            try? await Task.sleep(for: .milliseconds(50))
        }
    }
}

/// What the person watching an absorption chose.
private enum Decision {
    case none
    /// Continue without the store; the worker goes on.
    case `continue`
    /// Ctrl-C: stop the worker.
    case stop
}

/// This program's own path, to start its worker with.
func ownExecutable() -> URL {
    if let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
        return URL(fileURLWithPath: path)
    }
    return URL(fileURLWithPath: CommandLine.arguments[0])
}

enum SecureRandomHex {
    /// 16 random bytes in hex: a run's ID.
    static func make() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }
}

/// Prints the worker's records: every one as a JSON line, or as text (downloading at most twice a second).
final class RecordPrinter: Sendable {
    let json: Bool
    private let printed = Mutex(Date.distantPast)

    init(json: Bool) { self.json = json }

    func show(_ record: [String: Any]) {
        if json {
            var shown = record
            shown["run"] = nil
            shown["at"] = nil
            try? printJSON(shown)
            return
        }
        if let text = text(for: record) { streams.out(text) }
    }

    private func text(for record: [String: Any]) -> String? {
        func number(_ key: String) -> UInt64 { UInt64(record[key] as? Int ?? 0) }
        switch record["event"] as? String {
        case "requesting":
            let siblings = record["siblings"] as? Int ?? 0
            return record["attempt"] as? Int == 1
                ? "Asking \(siblings) sibling\(siblings == 1 ? "" : "s") for the store…" : nil
        case "may_continue":
            if record["foreground"] as? Bool == true {
                return "No byte of the store has arrived yet. This absorption runs in the foreground, so it waits on; "
                    + "Ctrl-C stops it, and `pixie sync retry` goes on later from what it downloaded."
            }
            return "No byte of the store has arrived yet. Press Enter to continue without it: it keeps coming in the "
                + "background, and `pixie sync status` shows how far it is. Ctrl-C stops it."
        case "preparing":
            guard throttled() else { return nil }
            return "A sibling is preparing its store: \(bytes(number("done_bytes"))) of about "
                + "\(bytes(number("estimated_bytes")))."
        case "sibling_failed":
            return "A sibling could not send it: \(record["reason"] as? String ?? "")"
        case "downloading":
            let (done, total) = (number("done_bytes"), number("total_bytes"))
            guard throttled() || done == total else { return nil }
            return "Downloading: \(bytes(done)) of \(bytes(total)), \(bytes(number("bytes_per_second")))/s, "
                + "\(record["seconds_left"] as? Int ?? 0) s left."
        case "importing":
            return "Checked: its SHA-256 is the sibling's. Importing…"
        case "reconciled":
            let (rowsIn, rowsOut) = (record["rows_in"] as? Int ?? 0, record["rows_out"] as? Int ?? 0)
            return "A reconcile round with \(record["siblings"] as? Int ?? 0) online sibling(s): \(rowsIn) row"
                + "\(rowsIn == 1 ? "" : "s") in, \(rowsOut) out."
        case "round_failed":
            return "The reconcile round did not run: \(record["reason"] as? String ?? ""); `pixie sync` runs one."
        default:
            return nil
        }
    }

    private func throttled() -> Bool {
        printed.withLock { last in
            let now = Date()
            guard now.timeIntervalSince(last) >= 0.5 else { return false }
            last = now
            return true
        }
    }
}

func bytes(_ count: UInt64) -> String {
    let value = Double(count)
    if count >= 1 << 30 { return String(format: "%.2f GiB", value / 1_073_741_824) }
    if count >= 1 << 20 { return String(format: "%.1f MiB", value / 1_048_576) }
    if count >= 1 << 10 { return String(format: "%.1f KiB", value / 1024) }
    return "\(count) B"
}
