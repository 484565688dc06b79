import Foundation
@_spi(Testing) import PixieDevice
import PixieWire
import Testing

/// The new device's side of the onboarding sync, by table: every event in every phase, with the actions it
/// returns and the phase it leaves (000_e422bd9a7c930342.txt, "What do I know?").
@Suite("AbsorbingStateMachine: every event in every phase")
struct AbsorbingStateMachineTests {
    static let phoneKey = Data(repeating: 0xA1, count: 32)
    static let tabletKey = Data(repeating: 0xB2, count: 32)
    static let strangerKey = Data(repeating: 0xC3, count: 32)
    static let phoneID = Data(repeating: 1, count: 16)
    static let tabletID = Data(repeating: 2, count: 16)

    /// The seed's timings, with a budget of three sends so the last round is near.
    static var configuration: SyncService.Configuration {
        var configuration = SyncService.Configuration()
        configuration.sends = 3
        return configuration
    }

    static func machine(siblings: Int = 2) -> AbsorbingStateMachine {
        let all: [AbsorbingStateMachine.Sibling] = [
            .init(deviceKey: phoneKey, requestID: phoneID), .init(deviceKey: tabletKey, requestID: tabletID),
        ]
        return AbsorbingStateMachine(siblings: Array(all.prefix(siblings)), configuration: configuration)
    }

    static let phonePreparing = SyncPreparing(requestID: phoneID, estimatedBytes: 100, doneBytes: 10)
    static let tabletPreparing = SyncPreparing(requestID: tabletID, estimatedBytes: 200, doneBytes: 0)
    static let phoneDeclined = SyncFailure(requestID: phoneID, kind: .declined, reason: "declined by its person")
    static let tabletBroke = SyncFailure(requestID: tabletID, kind: .exportFailed, reason: "disk full")
    static func offer(_ id: Data, blob: UInt8) -> SyncOffer {
        SyncOffer(
            requestID: id, blobID: Data(repeating: blob, count: 16), key: Data(repeating: 7, count: 32),
            nonce: Data(repeating: 8, count: 12), sha256: Data(repeating: 9, count: 32), sizeBytes: 5)
    }
    static let phoneOffer = offer(phoneID, blob: 0xAA)
    static let tabletOffer = offer(tabletID, blob: 0xBB)
    /// Whatever the download pipeline ends with is the machine's outcome.
    static let downloadOutcome = SyncService.Outcome.refused(["the blob did not open"])

    /// The phases a table row starts in, each reached by events from the start.
    enum Start: String, CaseIterable {
        case idle, requesting, lastRound, preparing, downloading, finished

        var machine: AbsorbingStateMachine {
            var machine = AbsorbingStateMachineTests.machine()
            let events: [AbsorbingStateMachine.Event]
            switch self {
            case .idle: events = []
            case .requesting: events = [.start]
            case .lastRound: events = [.start, .timerFired(.resend), .timerFired(.resend)]
            case .preparing: events = [.start, .preparing(from: phoneKey, phonePreparing)]
            case .downloading:
                events = [.start, .preparing(from: phoneKey, phonePreparing), .offer(from: phoneKey, phoneOffer)]
            case .finished:
                events = [
                    .start, .preparing(from: phoneKey, phonePreparing), .offer(from: phoneKey, phoneOffer),
                    .downloaded(downloadOutcome),
                ]
            }
            for event in events { _ = machine.handle(event) }
            return machine
        }
    }

    /// Every kind of event, from each sibling where it matters, and from a device that is not one.
    enum Input: String, CaseIterable {
        case start, resend, grace, preparingTimeout
        case phonePreparing, tabletPreparing, strangerPreparing
        case phoneFailure, tabletFailure, strangerFailure
        case phoneOffer, tabletOffer, strangerOffer
        case downloaded, relayClosed

        var event: AbsorbingStateMachine.Event {
            switch self {
            case .start: .start
            case .resend: .timerFired(.resend)
            case .grace: .timerFired(.grace)
            case .preparingTimeout: .timerFired(.preparingTimeout)
            case .phonePreparing: .preparing(from: phoneKey, AbsorbingStateMachineTests.phonePreparing)
            case .tabletPreparing: .preparing(from: tabletKey, AbsorbingStateMachineTests.tabletPreparing)
            // The phone's request_id, from a key that is not the phone's.
            case .strangerPreparing: .preparing(from: strangerKey, AbsorbingStateMachineTests.phonePreparing)
            case .phoneFailure: .failure(from: phoneKey, phoneDeclined)
            case .tabletFailure: .failure(from: tabletKey, tabletBroke)
            // The phone's request_id and reason, from a key that is not the phone's.
            case .strangerFailure: .failure(from: strangerKey, phoneDeclined)
            case .phoneOffer: .offer(from: phoneKey, AbsorbingStateMachineTests.phoneOffer)
            case .tabletOffer: .offer(from: tabletKey, AbsorbingStateMachineTests.tabletOffer)
            case .strangerOffer: .offer(from: strangerKey, AbsorbingStateMachineTests.phoneOffer)
            case .downloaded: .downloaded(downloadOutcome)
            case .relayClosed: .relayClosed
            }
        }
    }

    struct Row: Sendable, CustomTestStringConvertible {
        let start: Start
        let input: Input
        let actions: [AbsorbingStateMachine.Action]
        let phase: AbsorbingStateMachine.Phase
        var testDescription: String { "\(input.rawValue) in \(start.rawValue)" }
    }

    static let stopTimers: [AbsorbingStateMachine.Action] = [
        .cancelTimer(.resend), .cancelTimer(.grace), .cancelTimer(.preparingTimeout),
    ]
    static let closed = AbsorbingStateMachine.Action.fail(
        .closed("the relay closed the connection while waiting for a sibling"))
    static let taken = "another sibling's snapshot was taken"

    /// Rows whose event changes nothing: no action, the phase as it was.
    static func nothing(_ start: Start, _ inputs: [Input]) -> [Row] {
        inputs.map { Row(start: start, input: $0, actions: [], phase: start.machine.phase) }
    }

    static let table: [Row] =
        // Idle: only the start does anything.
        [
            Row(
                start: .idle, input: .start,
                actions: [
                    .report(.requesting(siblings: 2, attempt: 1)), .sendRequest(to: 0), .sendRequest(to: 1),
                    .scheduleTimer(.resend, at: .seconds(5)), .scheduleTimer(.grace, at: .seconds(30)),
                ], phase: .requesting(attempt: 1))
        ]
        + nothing(.idle, Input.allCases.filter { $0 != .start })
        // Requesting, round one of three.
        + [
            Row(
                start: .requesting, input: .resend,
                actions: [
                    .report(.requesting(siblings: 2, attempt: 2)), .sendRequest(to: 0), .sendRequest(to: 1),
                    .scheduleTimer(.resend, at: .seconds(10)),
                ], phase: .requesting(attempt: 2)),
            Row(start: .requesting, input: .grace, actions: [.report(.mayContinue)], phase: .requesting(attempt: 1)),
            Row(
                start: .requesting, input: .phonePreparing,
                actions: [
                    .cancelTimer(.resend), .sendCancel(to: 1), .startTimer(.preparingTimeout, after: .seconds(600)),
                    .report(.preparing(estimatedBytes: 100, doneBytes: 10)),
                ], phase: .preparing(chosen: 0)),
            Row(
                start: .requesting, input: .tabletPreparing,
                actions: [
                    .cancelTimer(.resend), .sendCancel(to: 0), .startTimer(.preparingTimeout, after: .seconds(600)),
                    .report(.preparing(estimatedBytes: 200, doneBytes: 0)),
                ], phase: .preparing(chosen: 1)),
            Row(
                start: .requesting, input: .phoneFailure,
                actions: [.report(.siblingFailed(.declined, reason: "declined by its person"))],
                phase: .requesting(attempt: 1)),
            Row(
                start: .requesting, input: .tabletFailure,
                actions: [.report(.siblingFailed(.exportFailed, reason: "disk full"))], phase: .requesting(attempt: 1)),
            Row(
                start: .requesting, input: .phoneOffer,
                actions: [.cancelTimer(.resend), .sendCancel(to: 1), .download(phoneOffer, from: 0)],
                phase: .downloading(chosen: 0)),
            Row(
                start: .requesting, input: .tabletOffer,
                actions: [.cancelTimer(.resend), .sendCancel(to: 0), .download(tabletOffer, from: 1)],
                phase: .downloading(chosen: 1)),
            Row(start: .requesting, input: .relayClosed, actions: stopTimers + [closed], phase: .finished),
        ]
        + nothing(
            .requesting, [.start, .preparingTimeout, .strangerPreparing, .strangerFailure, .strangerOffer, .downloaded])
        // Requesting, the last round: the budget runs out at the next re-send; the rest is as in round one.
        + [
            Row(start: .lastRound, input: .resend, actions: stopTimers + [.finish(.noAnswer)], phase: .finished),
            Row(start: .lastRound, input: .grace, actions: [.report(.mayContinue)], phase: .requesting(attempt: 3)),
            Row(
                start: .lastRound, input: .phonePreparing,
                actions: [
                    .cancelTimer(.resend), .sendCancel(to: 1), .startTimer(.preparingTimeout, after: .seconds(600)),
                    .report(.preparing(estimatedBytes: 100, doneBytes: 10)),
                ], phase: .preparing(chosen: 0)),
            Row(
                start: .lastRound, input: .tabletPreparing,
                actions: [
                    .cancelTimer(.resend), .sendCancel(to: 0), .startTimer(.preparingTimeout, after: .seconds(600)),
                    .report(.preparing(estimatedBytes: 200, doneBytes: 0)),
                ], phase: .preparing(chosen: 1)),
            Row(
                start: .lastRound, input: .phoneFailure,
                actions: [.report(.siblingFailed(.declined, reason: "declined by its person"))],
                phase: .requesting(attempt: 3)),
            Row(
                start: .lastRound, input: .tabletFailure,
                actions: [.report(.siblingFailed(.exportFailed, reason: "disk full"))], phase: .requesting(attempt: 3)),
            Row(
                start: .lastRound, input: .phoneOffer,
                actions: [.cancelTimer(.resend), .sendCancel(to: 1), .download(phoneOffer, from: 0)],
                phase: .downloading(chosen: 0)),
            Row(
                start: .lastRound, input: .tabletOffer,
                actions: [.cancelTimer(.resend), .sendCancel(to: 0), .download(tabletOffer, from: 1)],
                phase: .downloading(chosen: 1)),
            Row(start: .lastRound, input: .relayClosed, actions: stopTimers + [closed], phase: .finished),
        ]
        + nothing(
            .lastRound, [.start, .preparingTimeout, .strangerPreparing, .strangerFailure, .strangerOffer, .downloaded])
        // Preparing: the phone was chosen, the tablet cancelled.
        + [
            Row(start: .preparing, input: .grace, actions: [.report(.mayContinue)], phase: .preparing(chosen: 0)),
            Row(
                start: .preparing, input: .preparingTimeout,
                actions: stopTimers + [
                    .finish(.refused(["the sibling stopped reporting progress before its offer came"]))
                ],
                phase: .finished),
            Row(
                start: .preparing, input: .phonePreparing,
                actions: [
                    .startTimer(.preparingTimeout, after: .seconds(600)),
                    .report(.preparing(estimatedBytes: 100, doneBytes: 10)),
                ], phase: .preparing(chosen: 0)),
            Row(
                start: .preparing, input: .phoneFailure,
                actions: [.report(.siblingFailed(.declined, reason: "declined by its person"))] + stopTimers
                    + [.finish(.refused(["declined by its person"]))], phase: .finished),
            // The cancelled tablet broke anyway: heard, and the phone is still awaited.
            Row(
                start: .preparing, input: .tabletFailure,
                actions: [.report(.siblingFailed(.exportFailed, reason: "disk full"))], phase: .preparing(chosen: 0)),
            Row(
                start: .preparing, input: .phoneOffer,
                actions: [.cancelTimer(.preparingTimeout), .download(phoneOffer, from: 0)],
                phase: .downloading(chosen: 0)),
            // The tablet finished before its cancel came: its blob goes, and it hears why.
            Row(
                start: .preparing, input: .tabletOffer,
                actions: [
                    .deleteBlob(tabletOffer.blobName),
                    .sendAck(SyncAck(requestID: tabletID, ok: false, reason: taken), to: 1),
                ], phase: .preparing(chosen: 0)),
            Row(start: .preparing, input: .relayClosed, actions: stopTimers + [closed], phase: .finished),
        ]
        + nothing(
            .preparing,
            [.start, .resend, .tabletPreparing, .strangerPreparing, .strangerFailure, .strangerOffer, .downloaded])
        // Downloading the phone's blob: only the pipeline's end, and a late offer, do anything.
        + [
            Row(
                start: .downloading, input: .tabletOffer,
                actions: [
                    .deleteBlob(tabletOffer.blobName),
                    .sendAck(SyncAck(requestID: tabletID, ok: false, reason: taken), to: 1),
                ], phase: .downloading(chosen: 0)),
            Row(
                start: .downloading, input: .downloaded, actions: stopTimers + [.finish(downloadOutcome)],
                phase: .finished),
        ]
        + nothing(
            .downloading,
            [
                .start, .resend, .grace, .preparingTimeout, .phonePreparing, .tabletPreparing, .strangerPreparing,
                .phoneFailure, .tabletFailure, .strangerFailure, .phoneOffer, .strangerOffer, .relayClosed,
            ])
        // Finished: nothing moves it.
        + nothing(.finished, Input.allCases)

    @Test("the table has one row for every event in every phase")
    func everyPair() {
        let pairs = Self.table.map { "\($0.input.rawValue) in \($0.start.rawValue)" }
        #expect(Set(pairs).count == pairs.count, "a pair is in the table twice")
        #expect(pairs.count == Start.allCases.count * Input.allCases.count)
    }

    @Test("each event in each phase returns its actions and leaves its phase", arguments: table)
    func row(_ row: Row) {
        var machine = row.start.machine
        #expect(machine.handle(row.input.event) == row.actions)
        #expect(machine.phase == row.phase)
    }

    @Test("a device with no siblings finishes at once: the seed's noSiblings")
    func noSiblings() {
        var machine = Self.machine(siblings: 0)
        #expect(machine.handle(.start) == Self.stopTimers + [.finish(.noSiblings)])
        #expect(machine.phase == .finished)
    }

    @Test("every sibling says no: refused with every reason, without waiting out the re-sends")
    func everySiblingRefuses() {
        var machine = Self.machine()
        _ = machine.handle(.start)
        _ = machine.handle(Input.phoneFailure.event)
        #expect(
            machine.handle(Input.tabletFailure.event)
                == [.report(.siblingFailed(.exportFailed, reason: "disk full"))] + Self.stopTimers
                + [.finish(.refused(["declined by its person", "disk full"]))])
    }

    @Test("the budget spent after one sibling said no is refused with its reason, not noAnswer")
    func budgetAfterARefusal() {
        var machine = Start.lastRound.machine
        _ = machine.handle(Input.phoneFailure.event)
        #expect(
            machine.handle(.timerFired(.resend)) == Self.stopTimers + [.finish(.refused(["declined by its person"]))])
    }

    @Test("a re-send goes only to the siblings that have not answered")
    func resendSkipsAnswered() {
        var machine = Start.requesting.machine
        _ = machine.handle(Input.phoneFailure.event)
        #expect(
            machine.handle(.timerFired(.resend)) == [
                .report(.requesting(siblings: 1, attempt: 2)), .sendRequest(to: 1),
                .scheduleTimer(.resend, at: .seconds(10)),
            ])
    }

    @Test("the seed's budget: seven sends, then noAnswer at the eighth interval")
    func sevenSends() {
        var machine = AbsorbingStateMachine(
            siblings: [.init(deviceKey: Self.phoneKey, requestID: Self.phoneID)], configuration: .init())
        var sends = machine.handle(.start).filter { $0 == .sendRequest(to: 0) }.count
        var last: [AbsorbingStateMachine.Action] = []
        while machine.phase != .finished {
            last = machine.handle(.timerFired(.resend))
            sends += last.filter { $0 == .sendRequest(to: 0) }.count
        }
        #expect(sends == 7)
        #expect(last.last == .finish(.noAnswer))
    }
}
