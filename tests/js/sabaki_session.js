// Drives the engine the way Sabaki does, through @sabaki/gtp (Sabaki's own GTP client), and prints a JSON
// report on stdout for tests/gtp/test_sabaki_client.py to check.
// Usage: node sabaki_session.js '{"command": ["python", "-m", "gtp_engine", "--weights", "..."], "cwd": "..."}'
const {Controller, ControllerStateTracker} = require('@sabaki/gtp')

const play = (color, vertex) => ({name: 'play', args: [color, vertex]})

// Sabaki's reading of an analysis line (src/modules/enginesyncer.js): "info" blocks, a PV at the end of each,
// key-value pairs before it; kata- winrates are decimals.
function parseAnalysis(line) {
  return line
    .split(/\s*info\s+/)
    .slice(1)
    .map(block => {
      let pv = block.match(/(pass|[A-Za-z]\d+)(\s+(pass|[A-Za-z]\d+))*\s*$/)
      if (pv == null) return null
      let words = block.slice(0, pv.index).trim().split(/\s+/)
      let fields = {}
      for (let i = 0; i + 1 < words.length; i += 2) fields[words[i]] = words[i + 1]
      if (words[words.length - 1] !== 'pv') return null
      return {
        move: fields.move,
        visits: +fields.visits,
        winrate: fields.winrate,
        scoreLead: fields.scoreLead,
        pv: pv[0].trim().split(/\s+/)
      }
    })
}

async function main() {
  let {command, cwd} = JSON.parse(process.argv[2])
  let [path, ...args] = command
  let controller = new Controller(path, args, {cwd})
  let tracker = new ControllerStateTracker(controller)
  let sent = []
  let stderr = []
  controller.on('command-sent', ({command}) => sent.push([command.name, ...command.args].join(' ')))
  controller.on('stderr', ({content}) => stderr.push(content))
  controller.start()
  let report = {}

  // Start-up: Sabaki sends these without waiting for any answer.
  let startup = await Promise.all(
    ['name', 'version', 'protocol_version', 'list_commands'].map(name => controller.sendCommand({name}))
  )
  report.startup = startup.map(r => [r.error, r.content])

  // Sync: komi before boardsize, then the moves; later a different branch: undo and play, pipelined.
  let mark = sent.length
  await tracker.sync({komi: 6.5, boardsize: [9, 9], history: [play('B', 'D4'), play('W', 'F6'), play('B', 'C7')]})
  report.firstSync = sent.slice(mark)
  mark = sent.length
  await tracker.sync({
    komi: 6.5,
    boardsize: [9, 9],
    history: [play('B', 'D4'), play('W', 'F6'), play('B', 'E5'), play('W', 'E4'), play('B', 'PASS')]
  })
  report.branchSync = sent.slice(mark)
  report.board = (await controller.sendCommand({name: 'showboard'})).content

  // Analysis for White, streamed; Sabaki stops it by sending protocol_version.
  let lines = []
  let analysis = controller.sendCommand({name: 'kata-analyze', args: ['W', '10']}, ({line}) => {
    if (line.startsWith('info')) lines.push(line)
  })
  await new Promise(resolve => setTimeout(resolve, 1500))
  let abortSent = Date.now()
  let abort = controller.sendCommand({name: 'protocol_version'})
  let analysisResponse = await analysis
  report.abortMs = Date.now() - abortSent
  report.abort = [(await abort).error, (await abort).content]
  report.analysisError = analysisResponse.error
  report.analysisLines = lines.length
  report.parsed = lines.length ? parseAnalysis(lines[lines.length - 1]) : []

  // A move the way Sabaki asks for one: kata-genmove_analyze, waiting for the "play" line.
  let playLine = null
  let genmove = await tracker.queueCommand({name: 'kata-genmove_analyze', args: ['W', '10']}, ({line}) => {
    if (line.startsWith('play ')) playLine = line
  })
  report.genmove = [genmove.error, playLine]
  report.history = tracker.state.history.map(c => c.args.join(' '))
  // Syncing to the state the tracker now knows sends nothing: engine and GUI agree.
  mark = sent.length
  await tracker.sync({komi: 6.5, boardsize: [9, 9], history: tracker.state.history})
  report.resync = sent.slice(mark)

  let stopped = new Promise(resolve => controller.once('stopped', resolve))
  await controller.stop(3000)
  report.stopped = await stopped
  report.stderrLines = stderr.length
  process.stdout.write(JSON.stringify(report))
}

main().catch(error => {
  process.stdout.write(JSON.stringify({error: String(error && error.stack)}))
  process.exit(1)
})
