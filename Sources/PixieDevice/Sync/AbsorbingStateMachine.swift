import Foundation
import PixieWire

/// The new device's side of the onboarding sync, as a pure state machine (000_e422bd9a7c930342.txt, "What do I
/// know?"): it takes events (the start, a timer, a sibling's answer, the download's end, the relay closing) and
/// returns the actions to take, and does no I/O itself. ``SyncService/absorb(events:)`` drives it: it sends what
/// the actions say, runs the timers on the device's clock, and runs the download pipeline.
///
/// The phases: **requesting** (a SyncRequest to every sibling, re-sent every ``SyncService/Configuration/resendInterval``
/// up to ``SyncService/Configuration/sends`` times to those that have not answered), **preparing** (the first sibling
/// that says it is preparing is chosen, the others are sent a SyncCancel, and its progress keeps
/// ``SyncService/Configuration/preparingTimeout`` from running out), **downloading** (its offer came; the
/// pipeline stages, checks and imports the blob) and **finished**, with an explicit outcome for every way out:
/// absorbed, no siblings, no answer within the re-send budget, or refused (every sibling that answered declined
/// or broke, or the chosen one did or fell silent). The grace (``SyncService/Configuration/grace``) reports
/// ``SyncService/Event/mayContinue`` unless bytes are arriving.
@_spi(Testing) public struct AbsorbingStateMachine: Sendable {
    /// The machine's timers, which the driver runs on the device's clock.
    public enum Timer: Sendable, Hashable, CaseIterable {
        /// The next round of sends is due (or, after the last, the budget is spent).
        case resend
        /// The onboarding screen's grace is over.
        case grace
        /// The chosen sibling has said nothing for too long.
        case preparingTimeout
    }

    public enum Event: Sendable, Equatable {
        /// Begin: ask every sibling.
        case start
        case timerFired(Timer)
        /// A SyncPreparing from the device whose identity key is `from`.
        case preparing(from: Data, SyncPreparing)
        case failure(from: Data, SyncFailure)
        case offer(from: Data, SyncOffer)
        /// The download pipeline took the chosen offer's blob (and acked it) with this outcome.
        case downloaded(SyncService.Outcome)
        /// The relay ended the connection.
        case relayClosed
    }

    public enum Action: Sendable, Equatable {
        /// Seal and send a SyncRequest (stamped now) to the sibling at this index.
        case sendRequest(to: Int)
        case sendCancel(to: Int)
        case sendAck(SyncAck, to: Int)
        /// Delete a blob this device will not take, so it does not wait out its TTL.
        case deleteBlob(String)
        case report(SyncService.Event)
        /// Start a timer that fires this long from now.
        case startTimer(Timer, after: Duration)
        /// Start a timer that fires this long after the start (the re-sends and the grace: slow sends do not
        /// stretch the seed's schedule).
        case scheduleTimer(Timer, at: Duration)
        case cancelTimer(Timer)
        /// Run the download pipeline on this offer from the sibling at this index.
        case download(SyncOffer, from: Int)
        case finish(SyncService.Outcome)
        /// End with this error (thrown).
        case fail(RelayConnectionError)
    }

    /// One sibling asked: its identity key and the request_id chosen for it.
    public struct Sibling: Sendable, Equatable {
        public let deviceKey: Data
        public let requestID: Data

        public init(deviceKey: Data, requestID: Data) {
            self.deviceKey = deviceKey
            self.requestID = requestID
        }
    }

    public enum Phase: Sendable, Equatable {
        case idle
        case requesting(attempt: Int)
        case preparing(chosen: Int)
        case downloading(chosen: Int)
        case finished
    }

    public let siblings: [Sibling]
    let configuration: SyncService.Configuration
    public private(set) var phase = Phase.idle
    /// Which siblings answered (prepared or failed), and the reasons of those that failed.
    private var answered: [Bool]
    private var failures: [String?]

    public init(siblings: [Sibling], configuration: SyncService.Configuration) {
        self.siblings = siblings
        self.configuration = configuration
        answered = Array(repeating: false, count: siblings.count)
        failures = Array(repeating: nil, count: siblings.count)
    }

    static let closedReason = "the relay closed the connection while waiting for a sibling"
    static let silentReason = "the sibling stopped reporting progress before its offer came"
    static let takenReason = "another sibling's snapshot was taken"

    private var reasons: [String] { failures.compactMap { $0 } }

    /// Takes `event`, returns what to do, in order.
    public mutating func handle(_ event: Event) -> [Action] {
        switch (phase, event) {
        case (.finished, _):
            return []

        case (.idle, .start):
            guard !siblings.isEmpty else { return finish(.noSiblings) }
            phase = .requesting(attempt: 1)
            return [.report(.requesting(siblings: siblings.count, attempt: 1))]
                + siblings.indices.map { .sendRequest(to: $0) }
                + [
                    .scheduleTimer(.resend, at: configuration.resendInterval),
                    .scheduleTimer(.grace, at: configuration.grace),
                ]
        case (.idle, _):
            return []

        case (.requesting(let attempt), .timerFired(.resend)):
            guard attempt < configuration.sends else {
                return finish(reasons.isEmpty ? .noAnswer : .refused(reasons))
            }
            phase = .requesting(attempt: attempt + 1)
            let waiting = siblings.indices.filter { !answered[$0] }
            return [.report(.requesting(siblings: waiting.count, attempt: attempt + 1))]
                + waiting.map { .sendRequest(to: $0) }
                + [.scheduleTimer(.resend, at: configuration.resendInterval * (attempt + 1))]
        case (_, .timerFired(.resend)):
            return []

        case (.requesting, .timerFired(.grace)), (.preparing, .timerFired(.grace)):
            // No byte has arrived (a promise of bytes, a SyncPreparing, does not withhold it).
            return [.report(.mayContinue)]
        case (_, .timerFired(.grace)):
            return []

        case (.preparing(let chosen), .timerFired(.preparingTimeout)):
            failures[chosen] = Self.silentReason
            return finish(.refused(reasons))
        case (_, .timerFired(.preparingTimeout)):
            return []

        case (.requesting, .preparing(let from, let preparing)):
            guard let index = index(of: preparing.requestID, from: from) else { return [] }
            answered[index] = true
            phase = .preparing(chosen: index)
            // No second sibling uploads a store for nothing.
            return [.cancelTimer(.resend)] + cancelOthers(than: index)
                + [
                    .startTimer(.preparingTimeout, after: configuration.preparingTimeout),
                    .report(.preparing(estimatedBytes: preparing.estimatedBytes, doneBytes: preparing.doneBytes)),
                ]
        case (.preparing(let chosen), .preparing(let from, let preparing)):
            guard index(of: preparing.requestID, from: from) == chosen else { return [] }
            return [
                .startTimer(.preparingTimeout, after: configuration.preparingTimeout),
                .report(.preparing(estimatedBytes: preparing.estimatedBytes, doneBytes: preparing.doneBytes)),
            ]
        case (_, .preparing):
            return []

        case (.requesting, .failure(let from, let failure)), (.preparing, .failure(let from, let failure)):
            guard let index = index(of: failure.requestID, from: from) else { return [] }
            answered[index] = true
            failures[index] = failure.reason
            let report = Action.report(.siblingFailed(failure.kind, reason: failure.reason))
            // The one preparing broke (the others were cancelled), or every sibling said no.
            if phase == .preparing(chosen: index) || failures.allSatisfy({ $0 != nil }) {
                return [report] + finish(.refused(reasons))
            }
            return [report]
        case (_, .failure):
            return []

        case (.requesting, .offer(let from, let offer)):
            // An offer with no SyncPreparing before it: taken, and the others are cancelled.
            guard let index = index(of: offer.requestID, from: from) else { return [] }
            answered[index] = true
            phase = .downloading(chosen: index)
            return [.cancelTimer(.resend)] + cancelOthers(than: index) + [.download(offer, from: index)]
        case (.preparing(let chosen), .offer(let from, let offer))
        where index(of: offer.requestID, from: from) == chosen:
            phase = .downloading(chosen: chosen)
            return [.cancelTimer(.preparingTimeout), .download(offer, from: chosen)]
        case (.preparing(let chosen), .offer(let from, let offer)),
            (.downloading(let chosen), .offer(let from, let offer)):
            guard let index = index(of: offer.requestID, from: from), index != chosen else { return [] }
            // A sibling that finished before its cancel came: its blob goes now, and it hears why.
            let ack = SyncAck(requestID: offer.requestID, ok: false, reason: Self.takenReason)
            return [.deleteBlob(offer.blobName), .sendAck(ack, to: index)]
        case (_, .offer):
            return []

        case (.downloading, .downloaded(let outcome)):
            return finish(outcome)
        case (_, .downloaded):
            return []

        case (.requesting, .relayClosed), (.preparing, .relayClosed):
            phase = .finished
            return [
                .cancelTimer(.resend), .cancelTimer(.grace), .cancelTimer(.preparingTimeout),
                .fail(.closed(Self.closedReason)),
            ]
        case (_, .relayClosed):
            // The download does not need the relay; its ack is best effort.
            return []

        case (_, .start):
            return []
        }
    }

    private func index(of requestID: Data, from deviceKey: Data) -> Int? {
        siblings.firstIndex { $0.requestID == requestID && $0.deviceKey == deviceKey }
    }

    private mutating func cancelOthers(than index: Int) -> [Action] {
        var actions: [Action] = []
        for other in siblings.indices where other != index {
            answered[other] = true
            actions.append(.sendCancel(to: other))
        }
        return actions
    }

    private mutating func finish(_ outcome: SyncService.Outcome) -> [Action] {
        phase = .finished
        return [.cancelTimer(.resend), .cancelTimer(.grace), .cancelTimer(.preparingTimeout), .finish(outcome)]
    }
}
