import Foundation
import PixieDevice
import PixieWire

/// `pixie sync` on a device that has a store: one round of the digest reconcile loop with every sibling that is
/// online (docs/pixie-sync.md), printing what moved. A `pixie listen` running on this home at the same time keeps
/// its own rounds; each process takes only the messages of the rounds it opened.
func reconcileNow(home: DeviceHome, homePath: String, json: Bool, patience: Double) async throws {
    let context = try await DeviceContext.current(home: home, environment: deviceEnvironment(home))
    let names = await siblingNames(home)
    let service = try await SyncService.connect(context: context)
    let rounds: SyncLoop.Rounds
    do {
        rounds = try await service.reconcile(patience: .milliseconds(Int64((patience * 1000).rounded()))) { event in
            if json, let record = reconcileRecord(event, names: names) { try? printJSON(record) }
            if !json, case .clockCorrected(let offset) = event { streams.out(clockLine(offset)) }
        }
    } catch {
        await service.close()
        throw error
    }
    await service.close()
    let rowsIn = rounds.ended.reduce(0) { $0 + $1.rowsApplied }
    let rowsOut = rounds.ended.reduce(0) { $0 + $1.rowsSent }
    if json {
        for round in rounds.ended { try printJSON(roundRecord(round, names: names)) }
        try printJSON([
            "event": "reconciled", "siblings": rounds.ended.count, "rows_in": rowsIn, "rows_out": rowsOut,
            "unanswered": rounds.unanswered.map { name(of: $0, in: names) }, "unreached": rounds.unreached,
            "failures": rounds.failures,
        ])
    } else {
        for round in rounds.ended { streams.out(roundLine(round, names: names)) }
    }
    if rounds.ended.isEmpty, !rounds.failures.isEmpty {
        throw failure(rounds.failures.joined(separator: "; "))
    }
    if !json { for reason in rounds.failures { streams.err("pixie: \(reason)") } }
    if rounds.ended.isEmpty, rounds.unanswered.isEmpty {
        if rounds.unreached > 0 {
            throw failure(
                "no sibling could be reached: \(rounds.unreached) device\(rounds.unreached == 1 ? " has" : "s have") "
                    + "not finished joining (no inbox yet). Try again once it has")
        }
        if !json { streams.out("This is the account's only device: there is nothing to reconcile with.") }
        return
    }
    if !rounds.unanswered.isEmpty {
        let who = rounds.unanswered.map { name(of: $0, in: names) }.joined(separator: ", ")
        let message =
            "\(who) did not answer within \(Int(patience)) s: a sibling answers while `pixie listen` runs there"
        guard !rounds.ended.isEmpty else { throw failure(message + "; start it, then run `pixie sync` again") }
        if !json { streams.out("Not in step with \(message).") }
        return
    }
    if !json {
        streams.out(
            rowsIn + rowsOut == 0
                ? "In step with every sibling."
                : "In step with every sibling: \(rowsIn) row\(rowsIn == 1 ? "" : "s") in, \(rowsOut) out.")
    }
}

/// The account's devices by author tag, for naming siblings; empty when the roster cannot be fetched (the tags are
/// shown instead).
func siblingNames(_ home: DeviceHome) async -> [AuthorTag: String] {
    guard let devices = try? await OnboardingFlow(home: home, environment: deviceEnvironment(home)).devices() else {
        return [:]
    }
    var names: [AuthorTag: String] = [:]
    for device in devices { names[AuthorTag(devicePublicKey: device.pubkey)] = device.name }
    return names
}

func name(of sibling: AuthorTag, in names: [AuthorTag: String]) -> String {
    names[sibling].map { "\($0) (\(sibling))" } ?? "sibling \(sibling)"
}

/// One ended round, as `pixie sync` and `pixie listen` say it.
func roundLine(_ round: SyncLoop.Summary, names: [AuthorTag: String]) -> String {
    let who = name(of: round.sibling, in: names)
    var line =
        round.differed == 0
        ? "In step with \(who): all \(round.agreed) categories agree."
        : "Reconciled with \(who): \(round.rowsApplied) row\(round.rowsApplied == 1 ? "" : "s") in, "
            + "\(round.rowsSent) out; \(round.agreed) of 8 categories agree."
    if round.rowsHeld > 0 {
        line += " \(round.rowsHeld) of its rows are dated more than 5 minutes ahead of this device's clock and wait."
    }
    if round.rowsRefused > 0 {
        line += " \(round.rowsRefused) of its rows were not taken (the log says why)."
    }
    if round.rowsTooLarge > 0 {
        line +=
            " \(round.rowsTooLarge) rows are too large for a frame and could not go "
            + "through blob-svc; the next round tries again."
    }
    return line
}

func roundRecord(_ round: SyncLoop.Summary, names: [AuthorTag: String]) -> [String: Any] {
    [
        "event": "round", "sibling": "\(round.sibling)", "name": names[round.sibling] ?? NSNull(),
        "started": round.started, "agreed": round.agreed, "differed": round.differed, "rows_in": round.rowsApplied,
        "rows_out": round.rowsSent, "rows_held": round.rowsHeld, "rows_too_large": round.rowsTooLarge,
        "rows_refused": round.rowsRefused,
        "clock_difference_ms": round.clockDifference.map { Int($0) } ?? NSNull(),
    ]
}

/// The loop's other events as JSON records (its rounds are printed by the caller).
func reconcileRecord(_ event: SyncLoop.Event, names: [AuthorTag: String]) -> [String: Any]? {
    switch event {
    case .round: nil
    case .collected(let category, let count): ["event": "collected", "category": category.rawValue, "count": count]
    case .dropped(let reason): ["event": "round_dropped", "reason": reason]
    case .passed(let reason): ["event": "round_passed", "reason": reason]
    case .failed(let reason): ["event": "round_failed", "reason": reason]
    case .clockCorrected(let offset):
        ["event": "clock_corrected", "offset_ms": Int((offset * 1000).rounded()), "detail": clockLine(offset)]
    }
}

/// What a corrected clock means for the person.
func clockLine(_ offset: TimeInterval) -> String {
    let seconds = Int(abs(offset).rounded())
    let amount = seconds >= 7200 ? "\(seconds / 3600) h" : seconds >= 120 ? "\(seconds / 60) min" : "\(seconds) s"
    return "This device's clock is \(amount) \(offset > 0 ? "behind" : "ahead of") the server's: its writes are "
        + "dated, and its siblings' rows judged, by the server's time. Set the clock right when you can."
}
