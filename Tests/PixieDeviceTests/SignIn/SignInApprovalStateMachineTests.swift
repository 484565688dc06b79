import Foundation
@_spi(Testing) import PixieDevice
import PixieWire
import Testing

/// The new device's wait for an answer, by table: every event in every phase, with the actions it returns and the
/// phase it leaves. A schedule of three sends (0, 5, 15 s) and a 30-second wait.
@Suite("SignInApprovalStateMachine: every event in every phase")
struct SignInApprovalStateMachineTests {
    typealias Machine = SignInApprovalStateMachine

    static let code = "12345678"
    static let approved = SignInApproval.Approved(
        grant: "grant", accountSeed: Data(repeating: 1, count: 32), ktHandle: "handle",
        discoverySeed: Data(repeating: 2, count: 32))

    static func machine() -> Machine {
        Machine(checkCode: code, schedule: [.zero, .seconds(5), .seconds(15)], maximumWait: .seconds(30))
    }

    enum Start: String, CaseIterable {
        case idle, sendingFirst, waitingToResend, sendingSecond, scheduleDone, acknowledged, finished

        var events: [Machine.Event] {
            switch self {
            case .idle: []
            case .sendingFirst: [.start]
            case .waitingToResend: [.start, .sendEnded(index: 0, succeeded: true)]
            case .sendingSecond: [.start, .sendEnded(index: 0, succeeded: true), .timerFired(.resend)]
            case .scheduleDone:
                [
                    .start, .sendEnded(index: 0, succeeded: true), .timerFired(.resend),
                    .sendEnded(index: 1, succeeded: true), .timerFired(.resend), .sendEnded(index: 2, succeeded: true),
                ]
            case .acknowledged:
                [.start, .sendEnded(index: 0, succeeded: true), .answer(.acknowledged(deviceFamily: "Phone"))]
            case .finished: [.start, .answer(.rejected)]
            }
        }

        var machine: Machine {
            var machine = SignInApprovalStateMachineTests.machine()
            for event in events { _ = machine.handle(event) }
            return machine
        }
    }

    enum Input: String, CaseIterable {
        case start, resend, deadline
        case firstSent, firstSendFailed, secondSent, secondSendFailed
        case acknowledged, approved, rejected, relayClosed

        var event: Machine.Event {
            switch self {
            case .start: .start
            case .resend: .timerFired(.resend)
            case .deadline: .timerFired(.deadline)
            case .firstSent: .sendEnded(index: 0, succeeded: true)
            case .firstSendFailed: .sendEnded(index: 0, succeeded: false)
            case .secondSent: .sendEnded(index: 1, succeeded: true)
            case .secondSendFailed: .sendEnded(index: 1, succeeded: false)
            case .acknowledged: .answer(.acknowledged(deviceFamily: "Phone"))
            case .approved: .answer(.approved(SignInApprovalStateMachineTests.approved))
            case .rejected: .answer(.rejected)
            case .relayClosed: .relayClosed
            }
        }
    }

    struct Row: Sendable, CustomTestStringConvertible {
        let start: Start
        let input: Input
        let actions: [Machine.Action]
        let phase: Machine.Phase
        var testDescription: String { "\(input.rawValue) in \(start.rawValue)" }
    }

    static let stop: [Machine.Action] = [.cancelTimer(.resend), .cancelTimer(.deadline)]

    static func nothing(_ start: Start, _ inputs: [Input]) -> [Row] {
        inputs.map { Row(start: start, input: $0, actions: [], phase: start.machine.phase) }
    }

    /// What every waiting phase does alike: the deadline, the answers, the relay closing, a second start.
    static func answers(_ start: Start, next: Int, sending: Bool) -> [Row] {
        [
            Row(start: start, input: .start, actions: [], phase: start.machine.phase),
            Row(start: start, input: .deadline, actions: stop + [.fail(.noAnswer)], phase: .finished),
            Row(
                start: start, input: .acknowledged,
                actions: [.cancelTimer(.resend), .report(.acknowledged(deviceFamily: "Phone"))],
                phase: .waiting(nextSend: next, sending: sending, resendsOver: true)),
            Row(start: start, input: .approved, actions: stop + [.approve(approved)], phase: .finished),
            Row(start: start, input: .rejected, actions: stop + [.fail(.rejected)], phase: .finished),
            Row(start: start, input: .relayClosed, actions: stop + [.fail(.relayClosed)], phase: .finished),
        ]
    }

    static let table: [Row] =
        [
            Row(
                start: .idle, input: .start,
                actions: [
                    .report(.waiting(checkCode: code)), .send(index: 0), .startTimer(.deadline, at: .seconds(30)),
                ], phase: .waiting(nextSend: 1, sending: true, resendsOver: false))
        ]
        + nothing(.idle, Input.allCases.filter { $0 != .start })
        // The first send in flight.
        + answers(.sendingFirst, next: 1, sending: true)
        + [
            Row(
                start: .sendingFirst, input: .firstSent, actions: [.startTimer(.resend, at: .seconds(5))],
                phase: .waiting(nextSend: 1, sending: false, resendsOver: false)),
            Row(
                start: .sendingFirst, input: .firstSendFailed, actions: stop + [.fail(.firstSendFailed)],
                phase: .finished),
        ]
        + nothing(.sendingFirst, [.resend, .secondSent, .secondSendFailed])
        // Sent once, the re-send timer running.
        + answers(.waitingToResend, next: 1, sending: false)
        + [
            Row(
                start: .waitingToResend, input: .resend, actions: [.send(index: 1)],
                phase: .waiting(nextSend: 2, sending: true, resendsOver: false))
        ]
        + nothing(.waitingToResend, [.firstSent, .firstSendFailed, .secondSent, .secondSendFailed])
        // The second send in flight.
        + answers(.sendingSecond, next: 2, sending: true)
        + [
            Row(
                start: .sendingSecond, input: .secondSent, actions: [.startTimer(.resend, at: .seconds(15))],
                phase: .waiting(nextSend: 2, sending: false, resendsOver: false)),
            // A re-send that fails ends the re-sends, not the wait.
            Row(
                start: .sendingSecond, input: .secondSendFailed, actions: [],
                phase: .waiting(nextSend: 2, sending: false, resendsOver: true)),
        ]
        + nothing(.sendingSecond, [.resend, .firstSent, .firstSendFailed])
        // Every send of the schedule went out: only an answer or the deadline is left.
        + answers(.scheduleDone, next: 3, sending: false)
        + nothing(.scheduleDone, [.resend, .firstSent, .firstSendFailed, .secondSent, .secondSendFailed])
        // A sibling has it: no more re-sends.
        + answers(.acknowledged, next: 1, sending: false)
        + nothing(.acknowledged, [.resend, .firstSent, .firstSendFailed, .secondSent, .secondSendFailed])
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

    @Test("the default schedule sends seven times, at 0, 5, 15, 35, 75, 115 and 155 s, then only waits")
    func defaultSchedule() {
        let configuration = SignInApprovalRequester.Configuration(deviceModel: "Laptop")
        var machine = Machine(
            checkCode: Self.code, schedule: configuration.sendSchedule, maximumWait: configuration.maximumWait)
        var timers: [Duration] = []
        var sends = 0
        var actions = machine.handle(.start)
        while true {
            sends += actions.filter { if case .send = $0 { true } else { false } }.count
            guard case .send(let index)? = actions.first(where: { if case .send = $0 { true } else { false } }) else {
                break
            }
            actions = machine.handle(.sendEnded(index: index, succeeded: true))
            guard case .startTimer(.resend, let at)? = actions.first else { break }
            timers.append(at)
            actions = machine.handle(.timerFired(.resend))
        }
        #expect(sends == 7)
        #expect(timers == [5, 15, 35, 75, 115, 155].map { Duration.seconds($0) })
        #expect(machine.handle(.timerFired(.deadline)) == Self.stop + [.fail(.noAnswer)])
    }
}
