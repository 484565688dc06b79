import CommandLineKit
import Foundation
import PixieDevice
import Synchronization

/// `pixie sync`: absorb the store of a sibling that is online (`pixie listen` there).
struct Sync: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync", abstract: "Absorb the account's store from a sibling that is online.",
        discussion: """
            Asks every other device of the account for its store; the first that answers seals it and parks it on \
            blob-svc, and this device downloads it (resuming where it stopped), checks it and imports it. A sibling \
            answers while it runs `pixie listen`. `pixie signin` does this once it has joined; `pixie sync retry` asks \
            again. Rows this device has already are kept as they are.
            """,
        subcommands: [SyncStart.self, SyncRetry.self], defaultSubcommand: SyncStart.self)
}

struct SyncStart: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "start", abstract: "Ask the siblings for the store and absorb it (what `pixie sync` does).")

    @Option(name: .long("home"), help: "This device's directory.") var home: String
    @Flag(name: .long("json"), help: "Print progress and the result as JSON lines.") var json: Bool

    func run() async throws {
        try await reporting { try await absorbStore(home: try openHome(home), json: json) }
    }
}

struct SyncRetry: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "retry",
        abstract: "Ask again: after no sibling answered, or to finish a download that was cut off.")

    @Option(name: .long("home"), help: "This device's directory.") var home: String
    @Flag(name: .long("json"), help: "Print progress and the result as JSON lines.") var json: Bool

    func run() async throws {
        try await reporting { try await absorbStore(home: try openHome(home), json: json) }
    }
}

/// Runs SyncService.absorb, printing the phase, bytes, rate and time left; throws (exit 1) unless the store arrived
/// or there is no sibling to ask.
func absorbStore(home: DeviceHome, json: Bool) async throws {
    let service = try await SyncService.connect(home: home)
    let progress = ProgressPrinter(json: json)
    let outcome: SyncService.Outcome
    do {
        outcome = try await service.absorb { progress.show($0) }
    } catch {
        await service.close()
        throw error
    }
    await service.close()
    switch outcome {
    case .absorbed(let summary):
        if json {
            try printJSON(
                ["event": "absorbed", "rows": summary.rows, "inserted": summary.inserted, "present": summary.present])
        } else {
            streams.out(
                "Absorbed the store: \(summary.rows) rows, \(summary.inserted) new here"
                    + (summary.present > 0 ? ", \(summary.present) this device had already." : "."))
        }
    case .noSiblings:
        if json {
            try printJSON(["event": "no_siblings"])
        } else {
            streams.out("This is the account's only device: there is no store to absorb.")
        }
    case .noAnswer:
        if json { try printJSON(["event": "no_answer"]) }
        throw failure(
            "no sibling answered. Keep one online (`pixie listen` there), then run `pixie sync retry` here")
    case .refused(let reasons):
        if json { try printJSON(["event": "refused", "reasons": reasons]) }
        throw failure(
            "no sibling sent its store: " + reasons.joined(separator: "; ") + ". Run `pixie sync retry` to ask again")
    }
}

/// Prints SyncService's events: every one as a JSON line, or as text at most twice a second while downloading.
final class ProgressPrinter: Sendable {
    let json: Bool
    private let last = Mutex<(printed: Date, downloadStart: Date?)>((Date.distantPast, nil))

    init(json: Bool) { self.json = json }

    func show(_ event: SyncService.Event) {
        switch event {
        case .requesting(let siblings, let attempt):
            emit(
                ["event": "requesting", "siblings": siblings, "attempt": attempt],
                attempt == 1 ? "Asking \(siblings) sibling\(siblings == 1 ? "" : "s") for the store…" : nil)
        case .mayContinue:
            emit(
                ["event": "may_continue"],
                "No sibling has started sending its store yet. You may continue without it (Ctrl-C) and run `pixie "
                    + "sync retry` later; still asking.")
        case .preparing(let estimated, let done):
            emit(
                ["event": "preparing", "estimated_bytes": estimated, "done_bytes": done],
                throttled() ? "A sibling is preparing its store: \(bytes(done)) of about \(bytes(estimated))." : nil)
        case .siblingFailed(let kind, let reason):
            emit(
                ["event": "sibling_failed", "kind": "\(kind)", "reason": reason],
                "A sibling could not send it: \(reason)")
        case .downloading(let done, let total):
            let now = Date()
            let start = last.withLock { state -> Date in
                if state.downloadStart == nil { state.downloadStart = now }
                return state.downloadStart!
            }
            let elapsed: Double = max(now.timeIntervalSince(start), 0.001)
            let rate: Double = Double(done) / elapsed
            let secondsLeft: Int = rate > 0 ? Int((Double(total - done) / rate).rounded(.up)) : 0
            let object: [String: Any] = [
                "event": "downloading", "done_bytes": done, "total_bytes": total, "bytes_per_second": Int(rate),
                "seconds_left": secondsLeft,
            ]
            var text: String?
            if throttled() || done == total {
                text =
                    "Downloading: \(bytes(done)) of \(bytes(total)), \(bytes(UInt64(rate)))/s, \(secondsLeft) s left."
            }
            emit(object, text)
        case .importing:
            emit(["event": "importing"], "Checked: its SHA-256 is the sibling's. Importing…")
        case .dropped(let reason):
            emit(["event": "dropped", "reason": reason], nil)
        }
    }

    private func throttled() -> Bool {
        last.withLock { state in
            let now = Date()
            guard now.timeIntervalSince(state.printed) >= 0.5 else { return false }
            state.printed = now
            return true
        }
    }

    private func emit(_ object: [String: Any], _ text: String?) {
        if json {
            try? printJSON(object)
        } else if let text {
            streams.out(text)
        }
    }

    private func bytes(_ count: UInt64) -> String {
        let value = Double(count)
        if count >= 1 << 30 { return String(format: "%.2f GiB", value / 1_073_741_824) }
        if count >= 1 << 20 { return String(format: "%.1f MiB", value / 1_048_576) }
        if count >= 1 << 10 { return String(format: "%.1f KiB", value / 1024) }
        return "\(count) B"
    }
}
