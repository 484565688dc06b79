import Foundation
@_spi(Testing) import PixieDevice
import PixieWire
import SiblingsCrypto
import Testing

/// A sibling's side of the onboarding sync, by table: every event in every phase of one request, with the actions
/// it returns and the phase it leaves.
@Suite("OfferingStateMachine: every event in every phase of a request")
struct OfferingStateMachineTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let check = SyncRequestCheck(ownUserIDHash: Data(repeating: 0x55, count: 32), freshness: 300)
    static let newDevice = Data(repeating: 0xA1, count: 32)
    static let id = Data(repeating: 1, count: 16)
    static let request = makeRequest(stamped: now)
    static let stale = makeRequest(stamped: now.addingTimeInterval(-301))
    static let blob = "blob-offered"
    static let offer = SyncOffer(
        requestID: id, blobID: Data(repeating: 0xAA, count: 16), key: Data(repeating: 7, count: 32),
        nonce: Data(repeating: 8, count: 12), sha256: Data(repeating: 9, count: 32), sizeBytes: 9)

    static func makeRequest(stamped timestamp: Date) -> SyncRequest {
        SyncRequest(
            requestID: id, replySubject: try! RelaySubject(rawRepresentation: Data(repeating: 3, count: 32)),
            replyPubkey: replyKey, timestamp: timestamp)
    }
    static let replyKey = XWing.PrivateKey().publicKey

    /// The phases a row starts in, each reached by events from nothing.
    enum Start: String, CaseIterable {
        case unknown, checking, exporting, stopping, offering, offered, answered

        var events: [OfferingStateMachine.Event] {
            let checked = OfferingStateMachine.Event.rosterChecked(requestID: id, refusal: nil, now: now)
            let exported = OfferingStateMachine.Event.exportEnded(
                requestID: id, .uploaded(blobName: blob, offer: offer, rows: 3, bytes: 9))
            let request = OfferingStateMachine.Event.request(
                OfferingStateMachineTests.request, from: newDevice, now: now)
            switch self {
            case .unknown: return []
            case .checking: return [request]
            case .exporting: return [request, checked]
            case .stopping: return [request, checked, .cancel(requestID: id, now: now)]
            case .offering: return [request, checked, exported]
            case .offered: return [request, checked, exported, .offerSent(requestID: id, error: nil)]
            case .answered:
                return [
                    request, checked, exported, .offerSent(requestID: id, error: nil),
                    .ack(SyncAck(requestID: id, ok: true)),
                ]
            }
        }

        var machine: OfferingStateMachine {
            var machine = OfferingStateMachine(check: check)
            for event in events { _ = machine.handle(event) }
            return machine
        }

        var phase: OfferingStateMachine.Phase {
            switch self {
            case .unknown: .unknown
            case .checking: .checking
            case .exporting: .exporting
            case .stopping: .stopping
            case .offering: .offering
            case .offered: .offered
            case .answered: .answered
            }
        }
    }

    /// Every kind of event for the request.
    enum Input: String, CaseIterable {
        case request, staleRequest, rosterAllowed, rosterRefused
        case exportUploaded, exportFailed, exportStopped
        case offerSent, offerNotSent, cancel, ackOK, ackNotOK

        var event: OfferingStateMachine.Event {
            switch self {
            case .request: .request(OfferingStateMachineTests.request, from: newDevice, now: now)
            case .staleRequest: .request(stale, from: newDevice, now: now)
            case .rosterAllowed: .rosterChecked(requestID: id, refusal: nil, now: now)
            case .rosterRefused: .rosterChecked(requestID: id, refusal: "not in the roster", now: now)
            case .exportUploaded:
                .exportEnded(requestID: id, .uploaded(blobName: "blob-new", offer: offer, rows: 3, bytes: 9))
            case .exportFailed:
                .exportEnded(
                    requestID: id, .failed(.uploadFailed, reason: "blob-svc said no", uploadedBlob: "blob-half"))
            case .exportStopped: .exportEnded(requestID: id, .stopped(uploadedBlob: "blob-stopped"))
            case .offerSent: .offerSent(requestID: id, error: nil)
            case .offerNotSent: .offerSent(requestID: id, error: "relay gone")
            case .cancel: .cancel(requestID: id, now: now)
            case .ackOK: .ack(SyncAck(requestID: id, ok: true))
            case .ackNotOK: .ack(SyncAck(requestID: id, ok: false, reason: "hash differs"))
            }
        }
    }

    struct Row: Sendable, CustomTestStringConvertible {
        let start: Start
        let input: Input
        let actions: [OfferingStateMachine.Action]
        let phase: OfferingStateMachine.Phase
        var testDescription: String { "\(input.rawValue) in \(start.rawValue)" }
    }

    static let unstartedCancel = "a cancel for a request this device has not started; it will start nothing"
    static let ackOK = OfferingStateMachine.Action.report(.acknowledged(ok: true, reason: ""))
    static let ackNotOK = OfferingStateMachine.Action.report(.acknowledged(ok: false, reason: "hash differs"))
    static var staleReason: String {
        "a sync request stamped \(stale.timestamp), too far from this device's clock"
    }

    /// What an export's end does for a request that is not exporting: whatever it stored is deleted.
    static func strayExports(_ start: Start) -> [Row] {
        [
            Row(start: start, input: .exportUploaded, actions: [.deleteBlob("blob-new")], phase: start.phase),
            Row(start: start, input: .exportFailed, actions: [.deleteBlob("blob-half")], phase: start.phase),
            Row(start: start, input: .exportStopped, actions: [.deleteBlob("blob-stopped")], phase: start.phase),
        ]
    }

    static func nothing(_ start: Start, _ inputs: [Input]) -> [Row] {
        inputs.map { Row(start: start, input: $0, actions: [], phase: start.phase) }
    }

    static let table: [Row] =
        // Never seen.
        [
            Row(start: .unknown, input: .request, actions: [.checkRoster(request, from: newDevice)], phase: .checking),
            Row(start: .unknown, input: .staleRequest, actions: [.report(.dropped(staleReason))], phase: .unknown),
            // A cancel before its request (frames are handled each in its own task): the request starts nothing.
            Row(start: .unknown, input: .cancel, actions: [.report(.dropped(unstartedCancel))], phase: .answered),
            Row(start: .unknown, input: .ackOK, actions: [ackOK], phase: .unknown),
            Row(start: .unknown, input: .ackNotOK, actions: [ackNotOK], phase: .unknown),
        ]
        + strayExports(.unknown)
        + nothing(.unknown, [.rosterAllowed, .rosterRefused, .offerSent, .offerNotSent])
        // Checking the roster.
        + [
            Row(start: .checking, input: .rosterAllowed, actions: [.startExport(request)], phase: .exporting),
            Row(
                start: .checking, input: .rosterRefused, actions: [.report(.dropped("not in the roster"))],
                phase: .unknown),
            Row(start: .checking, input: .cancel, actions: [.report(.dropped(unstartedCancel))], phase: .answered),
            Row(start: .checking, input: .ackOK, actions: [ackOK], phase: .checking),
            Row(start: .checking, input: .ackNotOK, actions: [ackNotOK], phase: .checking),
        ]
        + strayExports(.checking)
        // A re-send while checking starts nothing; nor does a stale copy.
        + nothing(.checking, [.request, .staleRequest, .offerSent, .offerNotSent])
        // Exporting.
        + [
            Row(start: .exporting, input: .exportUploaded, actions: [.sendOffer(offer, to: request)], phase: .offering),
            // A failure is said to the new device (the seed swallowed it), and what was stored goes.
            Row(
                start: .exporting, input: .exportFailed,
                actions: [
                    .deleteBlob("blob-half"), .report(.failed("blob-svc said no")),
                    .sendFailure(
                        SyncFailure(requestID: id, kind: .uploadFailed, reason: "blob-svc said no"), to: request),
                ], phase: .answered),
            Row(
                start: .exporting, input: .exportStopped, actions: [.deleteBlob("blob-stopped"), .report(.cancelled)],
                phase: .answered),
            Row(
                start: .exporting, input: .cancel, actions: [.stopExport(requestID: id), .report(.cancelled)],
                phase: .stopping),
            Row(start: .exporting, input: .ackOK, actions: [ackOK], phase: .exporting),
            Row(start: .exporting, input: .ackNotOK, actions: [ackNotOK], phase: .exporting),
        ]
        + nothing(.exporting, [.request, .staleRequest, .rosterAllowed, .rosterRefused, .offerSent, .offerNotSent])
        // Stopping after a cancel: whatever the export ends with, nothing is offered and its blob goes.
        + [
            Row(start: .stopping, input: .exportUploaded, actions: [.deleteBlob("blob-new")], phase: .answered),
            Row(start: .stopping, input: .exportFailed, actions: [.deleteBlob("blob-half")], phase: .answered),
            Row(start: .stopping, input: .exportStopped, actions: [.deleteBlob("blob-stopped")], phase: .answered),
            Row(start: .stopping, input: .ackOK, actions: [ackOK], phase: .stopping),
            Row(start: .stopping, input: .ackNotOK, actions: [ackNotOK], phase: .stopping),
        ]
        + nothing(
            .stopping, [.request, .staleRequest, .rosterAllowed, .rosterRefused, .offerSent, .offerNotSent, .cancel])
        // Offering: the offer is on its way.
        + [
            Row(start: .offering, input: .offerSent, actions: [.report(.sent(rows: 3, bytes: 9))], phase: .offered),
            Row(
                start: .offering, input: .offerNotSent,
                actions: [
                    .deleteBlob(blob), .report(.failed("the offer could not be sent: relay gone")),
                    .sendFailure(
                        SyncFailure(
                            requestID: id, kind: .uploadFailed, reason: "the offer could not be sent: relay gone"),
                        to: request),
                ], phase: .answered),
            Row(start: .offering, input: .cancel, actions: [.deleteBlob(blob), .report(.cancelled)], phase: .answered),
            // The ack overtook the offer's own end: the offer is reported as sent all the same.
            Row(
                start: .offering, input: .ackOK, actions: [.report(.sent(rows: 3, bytes: 9)), ackOK], phase: .answered),
            Row(
                start: .offering, input: .ackNotOK,
                actions: [.report(.sent(rows: 3, bytes: 9)), .deleteBlob(blob), ackNotOK],
                phase: .answered),
        ]
        + strayExports(.offering)
        + nothing(.offering, [.request, .staleRequest, .rosterAllowed, .rosterRefused])
        // Offered: waiting for the ack, or a cancel (the new device took another sibling's).
        + [
            Row(start: .offered, input: .cancel, actions: [.deleteBlob(blob), .report(.cancelled)], phase: .answered),
            Row(start: .offered, input: .ackOK, actions: [ackOK], phase: .answered),
            Row(start: .offered, input: .ackNotOK, actions: [.deleteBlob(blob), ackNotOK], phase: .answered),
        ]
        + strayExports(.offered)
        + nothing(.offered, [.request, .staleRequest, .rosterAllowed, .rosterRefused, .offerSent, .offerNotSent])
        // Answered: a replay of the request starts no second export.
        + [
            Row(start: .answered, input: .cancel, actions: [.report(.dropped(unstartedCancel))], phase: .answered),
            Row(start: .answered, input: .ackOK, actions: [ackOK], phase: .answered),
            Row(start: .answered, input: .ackNotOK, actions: [ackNotOK], phase: .answered),
        ]
        + strayExports(.answered)
        + nothing(.answered, [.request, .staleRequest, .rosterAllowed, .rosterRefused, .offerSent, .offerNotSent])

    @Test("the table has one row for every event in every phase")
    func everyPair() {
        let pairs = Self.table.map { "\($0.input.rawValue) in \($0.start.rawValue)" }
        #expect(Set(pairs).count == pairs.count, "a pair is in the table twice")
        #expect(pairs.count == Start.allCases.count * Input.allCases.count)
    }

    @Test("each event in each phase returns its actions and leaves its phase", arguments: table)
    func row(_ row: Row) {
        var machine = row.start.machine
        #expect(machine.phase(of: Self.id) == row.start.phase, "the row does not start where it says")
        #expect(machine.handle(row.input.event) == row.actions)
        #expect(machine.phase(of: Self.id) == row.phase)
    }

    @Test("a request answered is forgotten after twice the freshness window, and may then start again")
    func answeredIsPruned() {
        var machine = Start.answered.machine
        let later = Self.now.addingTimeInterval(2 * 300 + 1)
        let again = Self.makeRequest(stamped: later)
        #expect(
            machine.handle(.request(again, from: Self.newDevice, now: later)) == [
                .checkRoster(again, from: Self.newDevice)
            ])
        var within = Start.answered.machine
        let soon = Self.now.addingTimeInterval(2 * 300)
        #expect(within.handle(.request(Self.makeRequest(stamped: soon), from: Self.newDevice, now: soon)) == [])
    }

    @Test("two requests are independent: a cancel of one leaves the other exporting")
    func twoRequests() {
        var machine = Start.exporting.machine
        let otherID = Data(repeating: 2, count: 16)
        let other = SyncRequest(
            requestID: otherID, replySubject: Self.request.replySubject, replyPubkey: Self.replyKey,
            timestamp: Self.now)
        #expect(
            machine.handle(.request(other, from: Self.newDevice, now: Self.now)) == [
                .checkRoster(other, from: Self.newDevice)
            ])
        _ = machine.handle(.cancel(requestID: otherID, now: Self.now))
        #expect(machine.phase(of: otherID) == .answered)
        #expect(machine.phase(of: Self.id) == .exporting)
    }
}
