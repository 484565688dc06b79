import CommandLineKit
import Foundation
import PixieDevice
import PixieWire
import Synchronization

/// `pixie sync`: absorb the store of a sibling that is online (`pixie listen` there).
struct Sync: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync", abstract: "Bring this device in step with its siblings that are online.",
        discussion: """
            On a device that has a store, runs one round of the digest reconcile loop with every sibling that is \
            online and says what moved (`pixie listen` does the same in the background: at its start, within a \
            second of a local write, and every 10 minutes). On a device with an empty store (it continued without \
            the snapshot, or --no-sync), or with --absorb, absorbs the whole store instead: \
            asks every other device of the account for its store; the first that answers seals it and parks it on \
            blob-svc, and this device downloads it (resuming where it stopped), checks it and imports it. A sibling \
            answers while it runs `pixie listen`. `pixie signin` does this itself once it has joined, unless \
            --no-sync; `pixie sync retry` asks again. Rows this device has already are kept as they are. The \
            absorption runs in a process of its own: if no byte of the store has arrived after the grace (30 s), \
            press Enter to continue without it while it goes on in the background; `pixie sync status` shows it.
            """,
        subcommands: [SyncStart.self, SyncRetry.self, SyncStatus.self, SyncWorker.self],
        defaultSubcommand: SyncStart.self)
}

/// How the terminal waits for an absorption (`pixie sync`, `pixie sync retry` and `pixie signin` share these).
struct AbsorbOptions: ParsableArguments {
    @Option(
        name: .long("grace"),
        help: "Seconds without a byte of the store before you may continue without it (the seed's 30).")
    var grace: Double = 30
    @Flag(
        name: .long("continue"),
        help: "Continue by yourself once the grace is over, leaving the absorption running in the background.")
    var continueAtGrace: Bool
    @Flag(
        name: .long("foreground"),
        help: "Absorb in this process, with no background: it ends only when the store is here or nobody sent it.")
    var foreground: Bool

    func check() throws {
        guard grace > 0, grace <= 3600 else { throw ValidationError("--grace must be more than 0, at most 3600") }
        if foreground && continueAtGrace {
            throw ValidationError("--foreground and --continue exclude each other: in the foreground nothing goes on")
        }
    }
}

struct SyncStart: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "start",
        abstract: "A reconcile round with every online sibling, or the whole store if this one is empty (`pixie sync`)."
    )

    @Option(name: .long("home"), help: "This device's directory.") var home: String
    @Flag(name: .long("absorb"), help: "Absorb a sibling's whole store even though this device has one.")
    var absorbAll: Bool
    @Option(name: .long("patience"), help: "Seconds to wait for the siblings' answers to a reconcile round.")
    var patience: Double = 15
    @OptionGroup var absorb: AbsorbOptions
    @Flag(name: .long("json"), help: "Print progress and the result as JSON lines.") var json: Bool

    func validate() throws {
        try absorb.check()
        guard patience > 0, patience <= 600 else {
            throw ValidationError("--patience must be more than 0, at most 600")
        }
    }

    func run() async throws {
        try await reporting {
            let device = try openHome(home)
            if try absorbAll || DeviceStore(home: device).isUnsynced {
                try await absorbStore(home: device, homePath: home, json: json, options: absorb, joined: false)
            } else {
                try await reconcileNow(home: device, homePath: home, json: json, patience: patience)
            }
        }
    }
}

struct SyncRetry: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "retry",
        abstract: "Ask again: after no sibling answered, or to finish a download that was cut off.")

    @Option(name: .long("home"), help: "This device's directory.") var home: String
    @OptionGroup var absorb: AbsorbOptions
    @Flag(name: .long("json"), help: "Print progress and the result as JSON lines.") var json: Bool

    func validate() throws { try absorb.check() }

    func run() async throws {
        try await reporting {
            try await absorbStore(home: try openHome(home), homePath: home, json: json, options: absorb, joined: false)
        }
    }
}

struct SyncStatus: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the last absorption, and whether this device agrees with each sibling, category by category.")

    @Option(name: .long("home"), help: "This device's directory.") var home: String
    @Flag(name: .long("json"), help: "Print the status as JSON.") var json: Bool

    func run() async throws {
        try await reporting {
            let device = try openHome(home)
            var status = absorption(SyncRunFiles(home: device))
            let reconciling = try await reconcileStatus(device, json: json)
            if json {
                status.merge(reconciling) { old, _ in old }
                try printJSON(status)
            }
        }
    }

    /// The last absorption's state (printed as text unless --json), as the JSON object's fields.
    func absorption(_ files: SyncRunFiles) -> [String: Any] {
        let records = files.records()
        guard let first = records.first, let run = first["run"] as? String else {
            if !json { streams.out("No absorption has run here.") }
            return ["state": "none"]
        }
        let mine = records.filter { $0["run"] as? String == run }
        let running = files.isRunning
        // The worker's reconcile round after the absorption (`round`, `reconciled`) is not its phase.
        let last =
            mine.last { !["dropped", "round", "reconciled"].contains($0["event"] as? String ?? "") } ?? first
        let event = last["event"] as? String ?? ""
        let final = SyncRunFiles.finalEvents.contains(event)
        let state = final ? event : (running ? "running" : "stopped")
        let amounts = mine.last { ["downloading", "preparing"].contains($0["event"] as? String ?? "") }
        var status: [String: Any] = [
            "state": state, "phase": event, "running": running,
            "started_at": Int((first["at"] as? Double ?? 0).rounded()),
            "updated_at": Int((last["at"] as? Double ?? 0).rounded()),
            "continued_offered": mine.contains { $0["event"] as? String == "may_continue" },
        ]
        for key in ["done_bytes", "total_bytes", "estimated_bytes"] { status[key] = amounts?[key] }
        for key in ["rows", "inserted", "present", "reason", "reasons"] { status[key] = last[key] }
        if json { return status }
        let started = Date(timeIntervalSince1970: first["at"] as? Double ?? 0)
        let ago = Int(Date().timeIntervalSince(started))
        switch state {
        case "running":
            var line = "Absorbing (started \(ago) s ago): "
            switch event {
            case "downloading":
                let done = UInt64(amounts?["done_bytes"] as? Int ?? 0)
                let total = UInt64(amounts?["total_bytes"] as? Int ?? 0)
                line += "downloading, \(bytes(done)) of \(bytes(total))."
            case "preparing":
                line += "a sibling is preparing its store."
            case "importing": line += "importing."
            default: line += "asking the siblings."
            }
            streams.out(line)
        case "stopped":
            streams.out(
                "The last absorption stopped before it ended (it was interrupted); `pixie sync retry --home "
                    + "\(home)` goes on from what it downloaded.")
        case "absorbed":
            streams.out(
                "The store was absorbed: \(last["rows"] as? Int ?? 0) rows, \(last["inserted"] as? Int ?? 0) new here."
            )
        case "no_siblings": streams.out("This is the account's only device: there was no store to absorb.")
        case "no_answer":
            streams.out("No sibling answered. Keep one online (`pixie listen` there), then `pixie sync retry`.")
        default:
            let reasons = (last["reasons"] as? [String]) ?? [last["reason"] as? String ?? "unknown"]
            streams.out(
                "The store did not arrive: \(reasons.joined(separator: "; ")). `pixie sync retry` asks again.")
        }
        return status
    }

    /// Whether this device agrees with each sibling, category by category, as its last rounds left it (printed as
    /// text unless --json), and the tombstones the agreement barrier still holds, with the sibling holding each.
    func reconcileStatus(_ device: DeviceHome, json: Bool) async throws -> [String: Any] {
        let store = try DeviceStore(home: device)
        let rounds = try store.siblingRounds()
        let agreements = try store.agreements()
        // Names from the logged roster, if it answers soon; the roster also says which devices the barrier waits for.
        let names = await withTaskGroup(of: [AuthorTag: String]?.self) { group in
            group.addTask { await siblingNames(device) }
            group.addTask {
                try? await Task.sleep(for: .seconds(3))
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first ?? [:]
        }
        let own = try device.state().author
        var known = Set(rounds.map(\.sibling)).union(agreements.map(\.sibling))
        known.formUnion(names.keys.filter { $0 != own })
        var siblings: [[String: Any]] = []
        for sibling in known.sorted() {
            let round = rounds.first { $0.sibling == sibling }
            var categories: [String: Any] = [:]
            var agreeing: [String] = []
            for category in StoreCategory.allCases {
                let agreement = agreements.first { $0.sibling == sibling && $0.category == category }
                // As the last round found it: a category that differed then and was reconciled agrees from its
                // close on, which that round recorded too.
                let agrees = round?.agreed.contains(category) ?? false
                if agrees { agreeing.append(category.rawValue) }
                categories[category.rawValue] = [
                    "agrees": agrees,
                    "agreed_at": agreement.map { Int($0.at.timeIntervalSince1970) as Any } ?? NSNull(),
                ]
            }
            let difference: Int64? = round?.clockDifference ?? nil
            siblings.append([
                "sibling": "\(sibling)", "name": names[sibling] ?? NSNull(),
                "last_round_at": round.map { Int($0.at.timeIntervalSince1970) } ?? NSNull(),
                "clock_difference_ms": difference.map { Int($0) as Any } ?? NSNull(), "categories": categories,
            ])
            guard !json else { continue }
            guard let round else {
                streams.out("\(name(of: sibling, in: names)): no round yet.")
                continue
            }
            let ago = max(0, Int(Date().timeIntervalSince(round.at)))
            var line = "\(name(of: sibling, in: names)): last round \(ago) s ago; "
            line +=
                agreeing.count == StoreCategory.allCases.count
                ? "all 8 categories agree"
                : "\(agreeing.count) of 8 categories agree"
                    + (agreeing.isEmpty ? "" : " (\(agreeing.joined(separator: ", ")))")
            if let difference = round.clockDifference, abs(difference) >= 1000 {
                line +=
                    "; its clock is \(abs(difference) / 1000) s \(difference > 0 ? "ahead of" : "behind") this one's"
            }
            streams.out(line + ".")
        }
        var tombstones: [String: Any] = [:]
        for category in StoreCategory.allCases {
            let held = try store.tombstones(category)
            guard held.count > 0 else { continue }
            // The sibling whose last agreement on this category came before the newest tombstone arrived holds it.
            let holder = known.filter { sibling in
                (agreements.first { $0.sibling == sibling && $0.category == category }?.seq ?? 0) < held.newestSeq
            }.sorted().first
            tombstones[category.rawValue] = [
                "count": held.count, "held_by": holder.map { "\($0)" as Any } ?? NSNull(),
            ]
            if !json {
                streams.out(
                    "\(held.count) tombstone\(held.count == 1 ? "" : "s") of \(category.rawValue) wait for "
                        + (holder.map { name(of: $0, in: names) } ?? "the next round") + " to agree before they go.")
            }
        }
        let offset = try device.state().serverClockOffset
        if !json, let offset, abs(offset) >= 2000 { streams.out(clockLine(TimeInterval(offset) / 1000)) }
        return [
            "siblings": siblings, "tombstones": tombstones,
            "server_clock_offset_ms": offset.map { Int($0) as Any } ?? NSNull(),
        ]
    }
}

/// Absorbs the store: in a worker the terminal watches (or in this process with --foreground), printing the phases,
/// bytes, rate and time left. Throws (exit 1) unless the store arrived, there is no sibling to ask, or the person
/// continued without it. `joined`: run by `pixie signin` for a device that just joined, which is in the account
/// whatever becomes of its store: then a store that did not come is said, not an error.
func absorbStore(
    home: DeviceHome, homePath: String, json: Bool, options: AbsorbOptions, joined: Bool
) async throws {
    let record: [String: Any]
    if options.foreground {
        record = try await absorbHere(home: home, json: json, grace: options.grace)
    } else {
        switch try await watchAbsorption(
            home: home, homePath: homePath, json: json, grace: options.grace, continueAtGrace: options.continueAtGrace)
        {
        case .ended(let ended): record = ended
        case .continued: return
        }
    }
    let event = record["event"] as? String ?? ""
    let retry = "`pixie sync retry --home \(homePath)`"
    switch event {
    case "absorbed":
        if !json {
            let (rows, inserted, present) =
                (record["rows"] as? Int ?? 0, record["inserted"] as? Int ?? 0, record["present"] as? Int ?? 0)
            streams.out(
                "Absorbed the store: \(rows) rows, \(inserted) new here"
                    + (present > 0 ? ", \(present) this device had already." : "."))
        }
        return
    case "no_siblings":
        if !json { streams.out("This is the account's only device: there is no store to absorb.") }
        return
    case "no_answer":
        let message = "no sibling answered. Keep one online (`pixie listen` there), then run \(retry) here"
        if joined {
            streams.err("pixie: this device is in the account, but its store did not arrive: \(message).")
            return
        }
        throw failure(message)
    default:
        let reasons = (record["reasons"] as? [String]) ?? [record["reason"] as? String ?? "it stopped"]
        let message = "no sibling sent its store: " + reasons.joined(separator: "; ") + ". Run \(retry) to ask again"
        if joined {
            streams.err("pixie: this device is in the account, but its store did not arrive: \(message).")
            return
        }
        throw failure(message)
    }
}

/// The absorption in this process (--foreground): its records printed as they come; the final one returned.
func absorbHere(home: DeviceHome, json: Bool, grace: Double) async throws -> [String: Any] {
    var configuration = SyncService.Configuration()
    configuration.grace = .milliseconds(Int64((grace * 1000).rounded()))
    let service = try await SyncService.connect(
        context: try DeviceContext(home: home, environment: deviceEnvironment(home)), configuration: configuration)
    let printer = RecordPrinter(json: json)
    let recorder = SyncRecorder()
    let outcome: SyncService.Outcome
    do {
        outcome = try await service.absorb { event in
            var record = recorder.record(for: event)
            if case .mayContinue = event {
                // In the foreground nothing goes on without this process: say so instead of offering to go on.
                record["foreground"] = true
            }
            printer.show(record)
        }
    } catch {
        await service.close()
        throw error
    }
    await service.close()
    let record = SyncRecorder.record(for: outcome)
    printer.show(record)
    if case .absorbed = outcome { await roundAfterAbsorbing(home: home, show: { printer.show($0) }) }
    return record
}
